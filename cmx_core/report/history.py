"""A metric over time, asv-style (issue 53 item 2): the runs of one configuration on one
hardware class in the order they ran, the primary metric with each run's band (its timed
repetitions, its metric's ``samples``), and a regression marked where a run's whole band
lies on the worse side of the previous run's. Runs without a band are drawn but never called
a regression: one value says nothing of the noise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cmx_core.results.compare import config_of, repetitions_of
from cmx_core.results.hardware import of_document

MIN_RUNS = 3
"""A history needs at least this many runs of one configuration."""


@dataclass(frozen=True)
class Moment:
    run_id: str
    created_at: str
    value: float
    low: float
    high: float
    banded: bool
    regression: bool = False


@dataclass(frozen=True)
class History:
    metric: str
    unit: str
    label: str
    moments: tuple[Moment, ...]

    @property
    def title(self) -> str:
        return f"{self.metric} over time ({self.label})"

    @property
    def regressions(self) -> tuple[Moment, ...]:
        return tuple(m for m in self.moments if m.regression)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "metric": self.metric, "unit": self.unit, "label": self.label,
                "moments": [m.__dict__ for m in self.moments]}


def histories(documents: Sequence[Mapping[str, Any]]) -> list[History]:
    """One history per configuration and hardware class with at least :data:`MIN_RUNS` runs."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for document in sorted(documents, key=lambda d: str(d["created_at"])):
        key = f"{of_document(document).id} {sorted(config_of(document).items())}"
        groups.setdefault(key, []).append(document)
    found = []
    for runs in groups.values():
        history = _history(runs) if len(runs) >= MIN_RUNS else None
        if history is not None:
            found.append(history)
    return found


def _history(runs: Sequence[Mapping[str, Any]]) -> History | None:
    metric = runs[0]["benchmark"].get("primary_metric")
    measured = [d for d in runs if (d["metrics"].get(metric) or {}).get("value") is not None]
    if len(measured) < MIN_RUNS:
        return None
    higher = bool(measured[0]["metrics"][metric]["higher_is_better"])
    moments: list[Moment] = []
    for document in measured:
        moment = _moment(document, metric)
        if moments and _worse(moments[-1], moment, higher):
            moment = replace(moment, regression=True)
        moments.append(moment)
    config = config_of(measured[0])
    label = ", ".join(f"{k}={v}" for k, v in sorted(config.items()) if not k.startswith("variation.")) or "runs"
    return History(str(metric), str(measured[0]["metrics"][metric]["unit"]),
                   f"{label}; {of_document(measured[0]).id}", tuple(moments))


def _moment(document: Mapping[str, Any], metric: str) -> Moment:
    """The run's value with its band: its timed repetitions, as compare takes them (none: the value alone)."""
    value = float(document["metrics"][metric]["value"])
    band = repetitions_of([document["metrics"][metric]])
    low, high = (band.low, band.high) if band is not None else (value, value)
    return Moment(document["run_id"], str(document["created_at"]), value, low, high, band is not None)


def _worse(before: Moment, after: Moment, higher_is_better: bool) -> bool:
    """Whether ``after``'s whole band is on the worse side of ``before``'s (both banded)."""
    if not (before.banded and after.banded):
        return False
    return after.high < before.low if higher_is_better else after.low > before.high
