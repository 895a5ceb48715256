"""matplotlib figures for reports, each returned as PNG bytes (the Agg backend: no display).

Every plotted value comes from a result document; a missing value is left out of the plot
(and shown as "-" with its reason in the report's tables), never drawn as zero.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.errors import UsageError

PERCENTILES = ("p50", "p90", "p95", "p97", "p99", "p99_9")
"""The latency summary keys of the mlperf section, in order."""

LATENCY_SECTIONS = ("latency_ns", "ttft_ns", "tpot_ns", "itl_ns")
"""mlperf section summaries: query latency and the LLM token latencies."""


@dataclass(frozen=True)
class Series:
    """One line or set of bars: a label and its (x, y, low, high) points (low/high: spread)."""

    label: str
    x: tuple[str, ...]
    y: tuple[float, ...]
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()


def _pyplot() -> Any:
    try:
        import matplotlib  # deferred: optional matplotlib, only when this runs
    except ImportError:

        raise UsageError("reports and plots need matplotlib: pip install 'cmx-core[report]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: matplotlib only when this runs (351 modules)

    return plt


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=96)
    _pyplot().close(figure)
    return buffer.getvalue()


def bars(title: str, ylabel: str, series: Series) -> bytes:
    """One metric across runs (or columns of repeats): bars at the median, whiskers min..max."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    positions = list(range(len(series.x)))
    axes.bar(positions, series.y, color="#4c72b0")
    if series.low and series.high:
        below = [y - lo for y, lo in zip(series.y, series.low, strict=True)]
        above = [hi - y for y, hi in zip(series.y, series.high, strict=True)]
        axes.errorbar(positions, series.y, yerr=[below, above], fmt="none", ecolor="#222222", capsize=4)
    axes.set_xticks(positions, series.x, rotation=30, ha="right", fontsize=8)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", alpha=0.3)
    return _png(figure)


def lines(title: str, xlabel: str, ylabel: str, series: Sequence[Series], log_y: bool = False) -> bytes:
    """Lines over a shared categorical x axis (sweep points, percentiles), one per series."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    for one in series:
        axes.plot(list(one.x), list(one.y), marker="o", label=one.label)
    if log_y:
        axes.set_yscale("log")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    if len(series) > 1:
        axes.legend(fontsize=8)
    return _png(figure)


def against_axis(plot: Any) -> bytes:
    """A metric against a numeric axis (:class:`cmx_core.report.axes.AxisPlot`): one line per
    value of the other axes, error bars from each point's repeats, the x scale numeric
    (logarithmic when the axis spans two decades)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    for line in plot.lines:
        xs, ys = [p.x for p in line.points], [p.y for p in line.points]
        below, above = [p.y - p.low for p in line.points], [p.high - p.y for p in line.points]
        axes.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=4, label=line.label)
    if plot.log_x:
        axes.set_xscale("log")
    axes.set_title(f"{plot.title} (median, min..max of repeats)")
    axes.set_xlabel(plot.axis)
    axes.set_ylabel(plot.unit)
    axes.grid(alpha=0.3)
    if len(plot.lines) > 1:
        axes.legend(fontsize=8)
    return _png(figure)


def trade_off(plot: Any) -> bytes:
    """Throughput against a cost (:class:`cmx_core.report.pareto.TradeOff`): every run a
    point, labelled with its configuration, the Pareto front as a step line through its points."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    axes.scatter([p.cost for p in plot.points], [p.throughput for p in plot.points], color="#9aa7b8",
                 label="runs")
    front = plot.front
    axes.step([p.cost for p in front], [p.throughput for p in front], where="post", color="#b3261e",
              marker="o", label="Pareto front")
    for point in plot.points:
        axes.annotate(point.label, (point.cost, point.throughput), fontsize=7, xytext=(4, 4),
                      textcoords="offset points")
    axes.set_title(plot.title)
    axes.set_xlabel(plot.xlabel)
    axes.set_ylabel(plot.ylabel)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return _png(figure)


def history(plot: Any) -> bytes:
    """A metric over time (:class:`cmx_core.report.history.History`): each run in the order it
    ran, its band as an error bar, regressions marked."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    xs = list(range(1, len(plot.moments) + 1))
    ys = [m.value for m in plot.moments]
    below, above = [m.value - m.low for m in plot.moments], [m.high - m.value for m in plot.moments]
    axes.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=4, color="#4c72b0", label="runs")
    marked = [(x, m.value) for x, m in zip(xs, plot.moments, strict=True) if m.regression]
    if marked:
        axes.scatter([x for x, _ in marked], [y for _, y in marked], marker="v", s=120, color="#b3261e",
                     zorder=3, label="regression (beyond the previous run's band)")
    axes.set_xticks(xs, [m.created_at[:16].replace("T", " ") for m in plot.moments], rotation=30, ha="right",
                    fontsize=7)
    axes.set_title(plot.title)
    axes.set_ylabel(plot.unit)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return _png(figure)


def latency_series(documents: Sequence[Mapping[str, Any]], section: str) -> list[Series]:
    """Per run, the percentiles of one mlperf latency summary (in ms), those present only."""
    found: list[Series] = []
    for document in documents:
        summary = (document.get("mlperf") or {}).get(section)
        if not isinstance(summary, Mapping):
            continue
        points = [(p, float(summary[p]) / 1e6) for p in PERCENTILES if isinstance(summary.get(p), (int, float))]
        if points:
            found.append(Series(str(document["run_id"])[:12], tuple(p for p, _ in points),
                                tuple(v for _, v in points)))
    return found


def sweep_series(axes_names: Sequence[str], rows: Sequence[Any], metric: str) -> tuple[str, list[Series]]:
    """A sweep's metric along its first axis, one line per value of the other axes."""
    x_axis = axes_names[0] if axes_names else "point"
    lines_by_rest: dict[str, list[tuple[str, float]]] = {}
    for row in rows:
        value = row.metrics.get(metric)
        if value is None:
            continue
        rest = ", ".join(f"{a}={row.point.get(a)}" for a in axes_names[1:]) or metric
        lines_by_rest.setdefault(rest, []).append((str(row.point.get(x_axis, row.index)), float(value)))
    return x_axis, [Series(label, tuple(x for x, _ in pts), tuple(y for _, y in pts))
                    for label, pts in lines_by_rest.items()]


@dataclass(frozen=True)
class Markers:
    """Points of one kind on a search's figure: run numbers (1..n, the order the search measured
    them) and their values."""

    label: str
    x: tuple[int, ...] = ()
    y: tuple[float, ...] = ()


@dataclass(frozen=True)
class SearchPlot:
    """What the figure of a ``cmx sweep --search`` draws, every value from its manifest: the
    trials by kind (a failed trial has no value and is in none), the best value so far, the best
    point and, when the noise is known, the band best ± sigma."""

    title: str
    ylabel: str
    runs: int
    measured: Markers
    infeasible: Markers
    pruned: Markers
    trajectory: Markers
    best: Markers
    band: tuple[float, float] | None = None


def search(plot: SearchPlot) -> bytes:
    """A search run by run: its trials' values, the best so far as a step line, the best point
    starred; a pruned trial is hollow at the last value its live series showed."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    if plot.band is not None:
        axes.axhspan(*plot.band, color="#f2b134", alpha=0.2, label="best ± noise sigma")
    if plot.trajectory.x:
        axes.step(plot.trajectory.x, plot.trajectory.y, where="post", color="#2a2a2a", linewidth=1.2,
                  label=plot.trajectory.label)
    _markers(axes, plot.measured, {"marker": "o", "color": "#4c72b0"})
    _markers(axes, plot.infeasible, {"marker": "x", "color": "#b3261e"})
    _markers(axes, plot.pruned, {"marker": "o", "facecolors": "none", "edgecolors": "#777777"})
    _markers(axes, plot.best, {"marker": "*", "s": 220, "color": "#f2b134", "edgecolors": "#2a2a2a", "zorder": 3})
    axes.xaxis.get_major_locator().set_params(integer=True)  # run numbers: no 2.5th run
    axes.set_xlim(0.5, plot.runs + 0.5)
    axes.set_title(plot.title)
    axes.set_xlabel("run (in the order the search measured them)")
    axes.set_ylabel(plot.ylabel)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside the plot: covers no point
    return _png(figure)


def _markers(axes: Any, markers: Markers, style: Mapping[str, Any]) -> None:
    if markers.x:
        axes.scatter(markers.x, markers.y, label=markers.label, **style)
