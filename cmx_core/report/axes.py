"""Each result metric against each axis the runs vary (issue 53 item 2), for any set of runs
that differ in their inputs or variations, a stored sweep or not: the axis on a numeric
scale (logarithmic where its values span two decades or more), one line per value of the
other axes, each point the median of its runs with the spread of their repeats (or of a
single run's timed repetitions, its metric's ``samples``) as error bars; runs of another
hardware class are lines of their own, never averaged in. A metric that only
echoes an input (demo-sort's ``items``) is configuration and is not plotted as a result."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.results.compare import axes_of, band_of, config_label, config_of, echo_of, number_of
from cmx_core.results.hardware import of_document

Group = Sequence[Mapping[str, Any]]
MAX_METRICS = 4
"""Plotted metrics, the primary first: a page of figures, not a wall."""
LOG_SPAN = 100.0
"""An axis whose largest value is this many times its smallest is drawn on a log scale."""


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Line:
    label: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class AxisPlot:
    """One metric against one numeric axis."""

    metric: str
    unit: str
    axis: str
    lines: tuple[Line, ...]
    log_x: bool

    @property
    def title(self) -> str:
        return f"{self.metric} by {self.axis}"

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "metric": self.metric, "unit": self.unit, "axis": self.axis, "log_x": self.log_x,
                "lines": [{"label": line.label, "points": [p.__dict__ for p in line.points]} for line in self.lines]}


def axis_plots(groups: Sequence[Group]) -> list[AxisPlot]:
    """The plots of ``groups`` (repeats of one lock each); none when no numeric axis varies."""
    firsts = [g[0] for g in groups if g]
    axes = axes_of([config_of(d) for d in firsts])
    numeric = [a for a in axes if all(number_of(config_of(d).get(a)) is not None for d in firsts)]
    documents = [d for g in groups for d in g]
    by_class = len({of_document(d).id for d in firsts}) > 1  # another hardware class is its own line
    found = []
    for metric in _result_metrics(documents, axes)[:MAX_METRICS]:
        for axis in numeric:
            plot = _plot(groups, metric, axis, [a for a in axes if a != axis], by_class)
            if plot is not None:
                found.append(plot)
    return found


def _result_metrics(documents: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> list[str]:
    names: dict[str, None] = {}
    for d in documents:
        primary = d["benchmark"].get("primary_metric")
        if primary in d["metrics"]:
            names.setdefault(primary)
    for d in documents:
        names.update(dict.fromkeys(d["metrics"]))
    return [n for n in names if echo_of(n, documents, axes) is None]


def _plot(groups: Sequence[Group], metric: str, axis: str, rest: Sequence[str], by_class: bool) -> AxisPlot | None:
    by_line: dict[str, list[Point]] = {}
    unit = ""
    for group in groups:
        present = [d["metrics"][metric] for d in group if (d["metrics"].get(metric) or {}).get("value") is not None]
        if not present:
            continue
        unit = unit or str(present[0]["unit"])
        config = config_of(group[0])
        parts = [config_label(config, rest)] if rest else []
        parts += [of_document(group[0]).id] if by_class else []
        label = ", ".join(parts) or metric
        by_line.setdefault(label, []).append(_point(float(config[axis]), present))
    lines = tuple(Line(label, tuple(sorted(points, key=lambda p: p.x))) for label, points in by_line.items())
    xs = [p.x for line in lines for p in line.points]
    if len(set(xs)) < 2:
        return None
    log_x = min(xs) > 0 and max(xs) / min(xs) >= LOG_SPAN
    return AxisPlot(metric, unit, axis, lines, log_x)


def _point(x: float, metrics: Sequence[Mapping[str, Any]]) -> Point:
    """The median of the runs' values, with the band compare gives them: the spread of the
    runs (several) or of the one run's timed repetitions."""
    y = float(statistics.median(float(m["value"]) for m in metrics))
    band = band_of(metrics)
    return Point(x, y, band.low, band.high, band.n) if band is not None else Point(x, y, y, y, 1)

