"""Compare the metrics of several runs side by side against the first one (the baseline).

A metric is compared only when both runs report it with the same unit and direction;
otherwise it is flagged, never converted or guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cmx_core.errors import ResultsError

Verdict = Literal["baseline", "better", "worse", "same", "missing", "units differ", "direction differs"]


@dataclass(frozen=True)
class Cell:
    """One run's value of a metric, and how it compares with the baseline's."""

    value: float | int | None
    unit: str | None
    verdict: Verdict
    delta: float | None = None
    delta_pct: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MetricRow:
    name: str
    higher_is_better: bool | None
    cells: tuple[Cell, ...]

    @property
    def units_differ(self) -> bool:
        return any(c.verdict == "units differ" for c in self.cells)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "higher_is_better": self.higher_is_better,
            "units_differ": self.units_differ,
            "cells": [c.to_json() for c in self.cells],
        }


@dataclass(frozen=True)
class RunColumn:
    run_id: str
    recipe: str
    status: str
    created_at: str
    task: str


@dataclass(frozen=True)
class Comparison:
    runs: tuple[RunColumn, ...]
    metrics: tuple[MetricRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.runs[0].run_id,
            "runs": [dict(r.__dict__) for r in self.runs],
            "metrics": [m.to_json() for m in self.metrics],
        }


def compare_documents(documents: Sequence[Mapping[str, Any]]) -> Comparison:
    """Compare validated result documents; the first is the baseline."""
    if len(documents) < 2:
        raise ResultsError("compare needs at least two runs (the first is the baseline)")
    runs = tuple(
        RunColumn(
            run_id=d["run_id"],
            recipe=d["software"]["recipe"]["name"],
            status=d["status"],
            created_at=d["created_at"],
            task=d["benchmark"]["task"],
        )
        for d in documents
    )
    rows = [_row(name, [d["metrics"].get(name) for d in documents]) for name in _names(documents)]
    rows.append(_row(WALL_TIME, [_wall_metric(d) for d in documents]))
    return Comparison(runs, tuple(rows))


WALL_TIME = "timing.wall_s"
"""The last row of every comparison: the runs' wall time (measured by cmx, lower is better)."""


def _wall_metric(document: Mapping[str, Any]) -> dict[str, Any]:
    return {"value": document["timing"]["wall_s"], "unit": "s", "higher_is_better": False}


def _names(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every metric name, primary metrics first, then in order of first appearance."""
    names: dict[str, None] = {}
    for d in documents:
        primary = d["benchmark"].get("primary_metric")
        if primary:
            names.setdefault(primary)
    for d in documents:
        for name in d["metrics"]:
            names.setdefault(name)
    return list(names)


def _row(name: str, metrics: list[Mapping[str, Any] | None]) -> MetricRow:
    base = metrics[0]
    direction = base["higher_is_better"] if base else next(
        (m["higher_is_better"] for m in metrics if m), None)
    cells = [_baseline_cell(base)] + [_cell(base, m) for m in metrics[1:]]
    return MetricRow(name, direction, tuple(cells))


def _baseline_cell(base: Mapping[str, Any] | None) -> Cell:
    if base is None:
        return Cell(None, None, "missing")
    return Cell(base["value"], base["unit"], "baseline")


def _cell(base: Mapping[str, Any] | None, other: Mapping[str, Any] | None) -> Cell:
    if other is None:
        return Cell(None, None, "missing")
    value, unit = other["value"], other["unit"]
    if base is None or base["value"] is None or value is None:
        return Cell(value, unit, "missing")
    if base["unit"] != unit:
        return Cell(value, unit, "units differ")
    if base["higher_is_better"] != other["higher_is_better"]:
        return Cell(value, unit, "direction differs")
    delta = value - base["value"]
    pct = delta / abs(base["value"]) * 100.0 if base["value"] != 0 else None
    return Cell(value, unit, _verdict(base["value"], value, other["higher_is_better"]), delta, pct)


def _verdict(base: float, value: float, higher_is_better: bool) -> Verdict:
    if math.isclose(base, value, rel_tol=1e-9, abs_tol=0.0):
        return "same"
    return "better" if (value > base) == higher_is_better else "worse"
