"""What a report shows, gathered from the results store: the runs (given, a sweep's points or
a recipe's newest), their comparison (repeats grouped by lock digest and hardware class), the
sweep table, and the figures."""

from __future__ import annotations

import base64
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmx_core import paths
from cmx_core.errors import UsageError
from cmx_core.report import plots
from cmx_core.report.axes import AxisPlot, axis_plots
from cmx_core.report.baseline import choose
from cmx_core.report.columns import group_by_lock
from cmx_core.report.history import History, histories
from cmx_core.report.pareto import TradeOff, trade_offs
from cmx_core.report.search import SearchSection, plot_of, read_search, section_of
from cmx_core.results.compare import Comparison, compare_samples
from cmx_core.results.faults import FaultReport, fault_report
from cmx_core.results.hardware import of_document
from cmx_core.results.sweep_table import sweep_table
from cmx_core.sweep.runner import read_manifest

SCORE_KEYS = ("score", "any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median", "medal",
              "rank", "absolute_score", "relative_score", "valid_submission")
"""Keys that mark a suite section as a score (MLE-bench's grading report, ALE-Bench's judge)."""

_ENVELOPE = frozenset({"schema_version", "run_id", "created_at", "status", "invalid_reasons", "benchmark",
                       "metrics", "system", "software", "timing", "artifacts", "outputs", "error", "provenance",
                       "notes", "model", "cost", "mlperf"})


@dataclass(frozen=True)
class Figure:
    title: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass(frozen=True)
class Selection:
    """Which runs: given ids, a sweep id or a recipe name (exactly one)."""

    runs: tuple[str, ...] = ()
    sweep: str | None = None
    recipe: str | None = None
    limit: int = 50
    baseline: str | None = None
    """The run the comparison is against (``--baseline``); None: chosen (:mod:`cmx_core.report.baseline`)."""
    across: tuple[str, ...] = ()
    """What runs are compared across (``--across``); by default only like configurations are."""

    def check(self) -> None:
        given = sum(bool(x) for x in (self.runs, self.sweep, self.recipe))
        if given != 1:
            raise UsageError("give runs, --sweep ID or --recipe NAME (exactly one of them)")


@dataclass(frozen=True)
class ReportData:
    title: str
    documents: tuple[Mapping[str, Any], ...]
    comparison: Comparison | None
    sweep: Any | None
    figures: tuple[Figure, ...]
    scores: tuple[Mapping[str, Any], ...] = field(default=())
    faults: FaultReport | None = None
    """The fault-tolerance report (docs/faults.md), when a run or point had a fault."""
    search: SearchSection | None = None
    """What a ``cmx sweep --search`` found, read from its manifest (docs/learning.md)."""
    baseline: str = ""
    """Which run the comparison is against, and why."""
    axis_plots: tuple[AxisPlot, ...] = ()
    """Each result metric against each axis the runs vary (drawn among ``figures``)."""
    trade_offs: tuple[TradeOff, ...] = ()
    """Throughput against latency or energy, with the Pareto front (drawn among ``figures``)."""
    histories: tuple[History, ...] = ()
    """The primary metric over time per configuration, regressions marked (drawn among ``figures``)."""

    def to_json(self) -> dict[str, Any]:
        """The report's data as one document (``cmx_core/schemas/report.schema.json``)."""
        return {"title": self.title, "runs": [d["run_id"] for d in self.documents],
                "figures": [f.title for f in self.figures], "baseline": self.baseline or None,
                "comparison": self.comparison.to_json() if self.comparison is not None else None,
                "axis_plots": [p.to_json() for p in self.axis_plots],
                "trade_offs": [t.to_json() for t in self.trade_offs],
                "histories": [h.to_json() for h in self.histories],
                "sweep": self.sweep.to_json() if self.sweep is not None else None}


def select(store: Any, selection: Selection) -> tuple[str, list[dict[str, Any]], Any | None]:
    """The title, documents and (for a sweep) the sweep table."""
    title, documents, table, _manifest = _select(store, selection)
    return title, documents, table


def _select(store: Any, selection: Selection) -> tuple[str, list[dict[str, Any]], Any | None,
                                                       Mapping[str, Any] | None]:
    """:func:`select` and, for a sweep, its manifest (a search's manifest holds the search)."""
    selection.check()
    if selection.sweep:
        manifest = read_manifest(paths.data_dir(), selection.sweep)
        table = sweep_table(manifest, store)
        documents = [store.get(r.run_id).document for r in table.rows if r.run_id and not r.message]
        return f"sweep {table.sweep_id}", documents, table, manifest
    if selection.recipe:
        summaries = store.list(limit=selection.limit, recipe=selection.recipe)
        if not summaries:
            raise UsageError(f"--recipe {selection.recipe}: no stored runs; `cmx results list` shows the recipes")
        return (f"recipe {selection.recipe}", [store.get(s.run_id).document for s in reversed(summaries)], None,
                None)
    documents = [store.get(run).document for run in selection.runs]
    return f"{len(documents)} run(s)", documents, None, None


def collect(store: Any, selection: Selection) -> ReportData:
    title, documents, table, manifest = _select(store, selection)
    groups = group_by_lock(documents)
    chosen = choose(groups, selection.baseline) if len(groups) > 1 and table is None else None
    # a sweep's points differ in their inputs by design: the sweep table is their comparison
    comparison = compare_samples(chosen.groups, selection.across) if chosen is not None else None
    section, search_figures = search_report(manifest, table)
    drawn, traded = axis_plots(groups), trade_offs(documents)
    by_axis = [Figure(p.title, plots.against_axis(p)) for p in drawn]
    # with axes, each metric against them; without, the primary metric across runs (and a sweep's table plot)
    fronts = [Figure(t.title, plots.trade_off(t)) for t in traded]
    timed = histories(documents) if table is None else []  # a sweep's points are one moment
    over_time = [Figure(h.title, plots.history(h)) for h in timed]
    figures = [*search_figures, *(by_axis or [*_metric_figures(groups), *_sweep_figures(table)]), *fronts,
               *over_time, *_latency_figures(documents)]
    faults = fault_report(documents, len(table.rows) if table is not None else None)
    return ReportData(title, tuple(documents), comparison, table, tuple(figures), tuple(score_rows(documents)),
                      faults, section, chosen.why if chosen is not None else "", tuple(drawn), tuple(traded),
                      tuple(timed))


def search_report(manifest: Mapping[str, Any] | None, table: Any | None) -> tuple[SearchSection | None,
                                                                                 list[Figure]]:
    """The section and figure of a search sweep (none for runs, a recipe or a grid sweep); the
    metric's unit is the one its stored runs report (the manifest does not hold it)."""
    search = read_search(manifest) if manifest is not None else None
    if search is None:
        return None, []
    unit = table.metrics.get(search.metric) if table is not None else None
    plot = plot_of(search, unit)
    figures = [Figure(plot.title, plots.search(plot))] if plot is not None else []
    return section_of(search, unit), figures


def primary(document: Mapping[str, Any]) -> str | None:
    name = document["benchmark"].get("primary_metric")
    return name if name in document["metrics"] else next(iter(document["metrics"]), None)


def _metric_figures(groups: Sequence[Sequence[Mapping[str, Any]]]) -> list[Figure]:
    """The primary metric of each group (median, min..max of its repeats)."""
    name = primary(groups[0][0]) if groups and groups[0] else None
    if name is None:
        return []
    series = metric_series(groups, name)
    if not series.x:
        return []
    unit = groups[0][0]["metrics"][name]["unit"]
    return [Figure(f"{name} across runs", plots.bars(f"{name} (median, min..max of repeats)", unit, series))]


def metric_series(groups: Sequence[Sequence[Mapping[str, Any]]], name: str) -> plots.Series:
    """One bar per group with a value: its median, whiskers at min and max."""
    labels, medians, lows, highs = [], [], [], []
    for group in groups:
        values = [float(v) for d in group if (v := (d["metrics"].get(name) or {}).get("value")) is not None]
        if values:
            labels.append(str(group[0]["run_id"])[:12] + (f" x{len(values)}" if len(values) > 1 else ""))
            medians.append(float(statistics.median(values)))
            lows.append(min(values))
            highs.append(max(values))
    return plots.Series(name, tuple(labels), tuple(medians), tuple(lows), tuple(highs))


def _sweep_figures(table: Any | None) -> list[Figure]:
    if table is None:
        return []
    figures = []
    for metric, unit in list(table.metrics.items())[:4]:
        x_axis, series = plots.sweep_series(table.axes, table.rows, metric)
        if series:
            figures.append(Figure(f"{metric} over the sweep",
                                  plots.lines(f"{metric} by {x_axis}", x_axis, unit, series)))
    return figures


def _latency_figures(documents: Sequence[Mapping[str, Any]]) -> list[Figure]:
    figures = []
    for section in plots.LATENCY_SECTIONS:
        series = plots.latency_series(documents, section)
        if series:
            name = section.removesuffix("_ns")
            figures.append(Figure(f"{name} percentiles", plots.lines(f"{name} latency percentiles", "percentile",
                                                                     "ms", series, log_y=True)))
    return figures


def score_rows(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per suite section holding a score or medals (MLE-bench, ALE-Bench...)."""
    rows = []
    for document in documents:
        for name, section in document.items():
            if name in _ENVELOPE or not isinstance(section, Mapping):
                continue
            found = {k: section[k] for k in SCORE_KEYS if k in section}
            if found:
                rows.append({"run_id": document["run_id"], "section": name, **found})
    return rows


def hardware_label(document: Mapping[str, Any]) -> str:
    cls = of_document(document)
    return f"{cls.id} ({cls.label})"
