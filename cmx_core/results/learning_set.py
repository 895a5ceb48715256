"""The runs a prediction learns from (``cmx results predict`` and ``suggest``, #51).

Comparable runs only: one recipe, one hardware class, a measured (not cached) value of the
metric, status valid or completed. A run's configuration is its query's inputs, defaults
included, and its selected variations as one text value (``variations``: the names joined
by ``+``, :data:`NO_VARIATION` for none) (``provenance.query``); the axes are the keys whose values
differ between those runs, the rest is fixed. Read from the run directories the index points
at, so a prediction always names the runs it learnt from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from cmx_core.errors import UsageError
from cmx_core.results.hardware import of_document

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from cmx_core.results.store import ResultStore

MEASURED = ("valid", "completed")
"""The statuses whose values a model may learn (invalid runs measured something else)."""
Value = str | float
"""A configuration value: a number, or any other input as its text."""
VARIATIONS = "variations"
"""The configuration key of the selected variations."""
NO_VARIATION = "-"


@dataclass(frozen=True)
class Observation:
    """One run: its configuration and the metric's value."""

    run_id: str
    config: dict[str, Value]
    value: float


@dataclass(frozen=True)
class LearningSet:
    """The comparable runs of a recipe on one hardware class, for one metric."""

    recipe: str
    metric: str
    unit: str
    higher_is_better: bool
    hardware: str
    tags: tuple[str, ...]
    observations: tuple[Observation, ...]

    @cached_property
    def axes(self) -> tuple[str, ...]:
        """The configuration keys whose values differ between the runs, sorted."""
        keys = sorted({key for o in self.observations for key in o.config})
        return tuple(k for k in keys if len({_key(o.config.get(k)) for o in self.observations}) > 1)

    @cached_property
    def fixed(self) -> dict[str, Value]:
        """The configuration every run shares (the keys that are not axes)."""
        first = self.observations[0].config
        return {k: v for k, v in first.items() if k not in self.axes}

    def levels(self, axis: str) -> list[Value]:
        """The distinct values ``axis`` took, numbers in order."""
        values = {_key(o.config[axis]): o.config[axis] for o in self.observations if axis in o.config}
        return sorted(values.values(), key=_key)

    def measured(self, config: Mapping[str, Value]) -> bool:
        """Whether a run with exactly these axis values is in the set."""
        return tuple(_key(config.get(a)) for a in self.axes) in self._measured

    @cached_property
    def _measured(self) -> set[tuple[tuple[int, float, str], ...]]:
        return {tuple(_key(o.config.get(a)) for a in self.axes) for o in self.observations}


def learning_set(store: ResultStore, query: LearningQuery) -> LearningSet:
    """The comparable runs ``query`` names, read from their result files."""
    rows = [r for r in store.list(limit=2**62, recipe=query.recipe) if r.status in MEASURED]
    if not rows:
        raise UsageError(f"no valid or completed run of recipe '{query.recipe}' is indexed (see 'cmx results list')")
    documents = [store.get(r.run_id).document for r in rows]
    hardware = _hardware(documents, query)
    metric = query.metric or _primary(documents)
    kept = [d for d in documents if of_document(d).id == hardware]
    observations = tuple(o for o in map(lambda d: _observation(d, metric), kept) if o is not None)
    unit, better = _metric_facts(kept, metric)
    newest = kept[0]["provenance"]["query"]
    return LearningSet(query.recipe, metric, unit, better, hardware, tuple(newest.get("tags") or ()),
                       observations)


@dataclass(frozen=True)
class LearningQuery:
    """Which runs to learn from: a recipe, optionally a metric (default: its primary one)
    and a hardware class (default: the only one its runs have)."""

    recipe: str
    metric: str | None = None
    hardware: str | None = None


def _hardware(documents: Sequence[Mapping[str, Any]], query: LearningQuery) -> str:
    classes = sorted({of_document(d).id for d in documents})
    if query.hardware is not None:
        if query.hardware not in classes:
            raise UsageError(f"--hardware {query.hardware}: no measured run of '{query.recipe}' on it; its runs are "
                             f"on {', '.join(classes)}")
        return query.hardware
    if len(classes) > 1:
        raise UsageError(f"the runs of '{query.recipe}' are on {len(classes)} hardware classes ({', '.join(classes)}): "
                         "a model learns one; pick it with --hardware CLASS")
    return classes[0]


def _primary(documents: Sequence[Mapping[str, Any]]) -> str:
    primary = (documents[0].get("benchmark") or {}).get("primary_metric")
    if not primary:
        raise UsageError("the recipe's runs name no primary metric: give --metric NAME")
    return str(primary)


def _observation(document: Mapping[str, Any], metric: str) -> Observation | None:
    """The run as an observation, or None: no measured value, or a cached measurement (a
    copy of another run's value, which would count it twice)."""
    provenance = document.get("provenance") or {}
    value = ((document.get("metrics") or {}).get(metric) or {}).get("value")
    if provenance.get("cached_measurement") or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    query = provenance.get("query") or {}
    config: dict[str, Value] = {k: _value(v) for k, v in (query.get("inputs") or {}).items()}
    chosen = sorted(name for name, on in (query.get("variations") or {}).items() if on)
    config[VARIATIONS] = "+".join(chosen) or NO_VARIATION
    return Observation(str(document["run_id"]), config, float(value))


def _metric_facts(documents: Sequence[Mapping[str, Any]], metric: str) -> tuple[str, bool]:
    for document in documents:
        found = (document.get("metrics") or {}).get(metric)
        if isinstance(found, dict):
            return str(found.get("unit") or ""), bool(found.get("higher_is_better", True))
    names = sorted({name for d in documents for name in (d.get("metrics") or {})})
    raise UsageError(f"--metric {metric}: no run of this recipe measured it; they measured {', '.join(names)}")


def _value(raw: Any) -> Value:
    """A number stays a number (a bool is text, ``true``/``false`` as typed: a choice, not a quantity)."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (int, float)):
        return float(raw)
    return str(raw)


def _key(value: Value | None) -> tuple[int, float, str]:
    """Sorts numbers before text and numbers by value."""
    if isinstance(value, float):
        return (0, value, "")
    return (1, 0.0, "" if value is None else value)
