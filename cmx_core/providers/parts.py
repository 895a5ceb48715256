"""Several result parts from one run, merged by section; a disagreement is refused.

A run whose steps (in one node or several) each return a :class:`ResultPart` gets one
result: the parts' metrics, ``benchmark`` keys and ``sections`` are joined, and the run's
status is the gravest of theirs (``error`` > ``invalid`` > ``partial`` > ``valid`` >
``completed``). Two parts that set the same metric, the same section or the same
``benchmark`` key to different values are a :class:`ResultsError` naming both nodes, never
a silent last-wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cmx_core.errors import ResultsError
from cmx_core.providers.values import Metric, ResultPart

GRAVITY: tuple[str, ...] = ("error", "invalid", "partial", "valid", "completed")
"""Statuses from the gravest: the merged part has the first one any part has."""


def merge_parts(parts: Sequence[tuple[str, ResultPart]]) -> ResultPart:
    """One part from ``(node_id, part)`` pairs in plan order; ResultsError on a clash."""
    benchmark: dict[str, Any] = {}
    metrics: dict[str, Metric] = {}
    sections: dict[str, Any] = {}
    owners: dict[str, str] = {}
    reasons: list[str] = []
    notes: list[str] = []
    for node, part in parts:
        _join(benchmark, part.benchmark, node, owners, "benchmark key", compare=True)
        _join(metrics, part.metrics, node, owners, "metric", compare=False)
        _join(sections, part.sections, node, owners, "result section", compare=False)
        reasons += [r for r in part.invalid_reasons if r not in reasons]
        notes += [part.notes] if part.notes and part.notes not in notes else []
    status = min((part.status for _, part in parts), key=GRAVITY.index)
    return replace(parts[0][1], status=status, benchmark=benchmark, metrics=metrics, invalid_reasons=tuple(reasons),
                   sections=sections, notes="; ".join(notes))


def _join(into: dict[str, Any], new: Mapping[str, Any], node: str, owners: dict[str, str],
          what: str, *, compare: bool) -> None:
    """Add ``new`` to ``into``; a key already there is a clash unless ``compare`` and equal."""
    for key, value in new.items():
        label = f"{what} '{key}'"
        if key in into and not (compare and into[key] == value):
            raise ResultsError(
                f"two steps of the run report {label}: node {owners[label]} and node {node}; "
                f"a run's result parts are merged by section, so each {what} may come from one step only")
        into[key] = value
        owners.setdefault(label, node)
