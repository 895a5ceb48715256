"""The measured window of a run (:mod:`cmx_core.conditions`): read at the start and the end
of the local executor's run, judged, and recorded as the result's ``conditions`` section.

Only the ``local`` executor is measured here, as only its steps are this process's tree: a
container's or a remote job's processes would count as outside load. A remote executor's
far side runs ``cmx run --lock`` with the local executor, which records its own section, and
the near side keeps it (``cmx_core/run/remote.py``). A run
whose every node was served from the cache measured nothing and gets no section.
"""

from __future__ import annotations

from typing import Any

from cmx_core.conditions.record import BOUNDS
from cmx_core.conditions.window import MeasuredWindow
from cmx_core.providers.types import ExecutionOutcome


def start_window(executor: str) -> MeasuredWindow | None:
    """The window of a run on ``executor`` (None: not measured here)."""
    return MeasuredWindow.start() if executor == "local" else None


def conditions_section(window: MeasuredWindow | None, outcome: ExecutionOutcome) -> dict[str, Any] | None:
    """The ``conditions`` section, or None when nothing ran; a remote executor's outcome
    brings its far side's (``ExecutionOutcome.conditions``)."""
    if window is None:
        return dict(outcome.conditions) if outcome.conditions is not None else None
    if outcome.nodes and all(node.status == "cached" for node in outcome.nodes):
        return None
    return window.finish(at_least_s=BOUNDS["min_window_s"] if _measured(outcome) else 0.0).to_json()


def _measured(outcome: ExecutionOutcome) -> bool:
    """Whether the run has metrics, the numbers a verdict judges: only then is a short window
    held open until its CPU use can be judged (a detection or an install waits for nothing)."""
    return any(part.metrics for node in outcome.nodes for part in node.parts)
