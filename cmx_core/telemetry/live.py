"""The steps running now and what each has reported: what the live progress line shows.

The local executor enters every step it runs on the :data:`BOARD` while the step runs;
``cmx run``'s progress (``cmx_core/cli/progress.py``) reads it once a second. A step's own
progress is what it reported on the application channel (:mod:`.appmetrics`) since it
started: with telemetry on, the run sampler's series; with ``--no-telemetry``, the board's
own series, which only the progress line reads and nothing stores.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cmx_core.telemetry.appmetrics import AppSeries, AppValue


@dataclass(frozen=True)
class RunningStep:
    """One step of one node, running since ``started`` (``time.monotonic()``)."""

    node_id: str
    step_id: str
    uses: str
    started: float

    @property
    def key(self) -> str:
        """The ``step`` label of its application series (``<node id>/<step id>``)."""
        return f"{self.node_id}/{self.step_id}"


class LiveBoard:
    """Thread-safe: steps start and end on the executor's threads, progress reads from its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str, float], RunningStep] = {}
        self.own = AppSeries()
        """Where steps report when no run sampler is active (progress only)."""
        self._sampled: list[AppSeries] = []

    @property
    def series(self) -> AppSeries:
        """The series steps report into now: the active run sampler's, else :attr:`own`."""
        return self._sampled[-1] if self._sampled else self.own

    @contextmanager
    def sampled_by(self, series: AppSeries) -> Iterator[None]:
        """While a run sampler is active, its series are what steps report and progress reads."""
        self._sampled.append(series)
        try:
            yield
        finally:
            self._sampled.remove(series)

    @contextmanager
    def running(self, node_id: str, step_id: str, uses: str) -> Iterator[RunningStep]:
        """The step is on the board for the ``with`` block."""
        step = RunningStep(node_id, step_id, uses, time.monotonic())
        handle = (node_id, step_id, step.started)
        with self._lock:
            self._running[handle] = step
        try:
            yield step
        finally:
            with self._lock:
                del self._running[handle]
            self.own.forget(step.key)  # a progress-only series keeps nothing once its step ended

    def steps(self) -> tuple[RunningStep, ...]:
        with self._lock:
            return tuple(sorted(self._running.values(), key=lambda s: s.started))

    def reported(self, step: RunningStep) -> tuple[AppValue, ...]:
        """What ``step`` reported since it started, by name."""
        values = [v for v in self.series.snapshot() if v.step == step.key and v.at >= step.started]
        return tuple(sorted(values, key=lambda v: (v.name, v.labels)))


BOARD = LiveBoard()
