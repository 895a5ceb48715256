"""The run's telemetry around its executor: start the sampler, let the steps report into it,
stop it, and fold its ``telemetry`` section (which names the series file) into the outcome;
for ``--soak DURATION``, repeat the plan and add the soak's verdict (:mod:`cmx_core.telemetry.soak`).

A run whose every node was served from the cache ran nothing: it gets no ``telemetry``
section and no series file (so the warm-run replay, which skips the engine, writes the same
result). Only the ``local`` executor is sampled here: a remote executor's far side runs
``cmx run --lock``, which samples the machine the steps really run on.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cmx_core.errors import UsageError
from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings, sampling
from cmx_core.telemetry.openmetrics import SERIES_FILE
from cmx_core.telemetry.own import deep_size

if TYPE_CHECKING:
    from cmx_core.conditions.record import Conditions
    from cmx_core.plugins.registry import ExecutionRequest
    from cmx_core.providers.types import ExecutionOutcome
    from cmx_core.providers.values import Metric
    from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings
    from cmx_core.telemetry.soak import Measure, Repetition


def check_settings(settings: TelemetrySettings | None) -> TelemetrySettings:
    """The run's settings (from the environment when not given); a ``--metrics-port``
    already in use is refused now, before anything runs (exit 2)."""
    chosen = settings if settings is not None else TelemetrySettings.from_env()
    if chosen.enabled and chosen.metrics_port is not None:
        _check_free(chosen.metrics_addr, chosen.metrics_port)
    return chosen


def _check_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            raise UsageError(f"--metrics-port {port}: cannot listen on {host}:{port} ({err.strerror})") from None


class Observation:
    """What the engine runs the executor through: :meth:`run` (once, or repeated for a soak)
    and :meth:`fold` (the telemetry into the outcome, once the sampling has stopped)."""

    def __init__(self, request: ExecutionRequest, telemetry: RunTelemetry | None, soak_s: float | None) -> None:
        self.request = request
        self.telemetry = telemetry
        self.soak_s = soak_s
        self.section: dict[str, Any] = {}
        self.repetitions: list[Repetition] = []
        self.measure: Measure | None = None

    def run(self, once: Callable[[], ExecutionOutcome]) -> ExecutionOutcome:
        if self.telemetry is None or self.soak_s is None:
            return once()
        outcome = self._repeat(once)
        deadline = time.monotonic() + self.soak_s
        while outcome.error is None and time.monotonic() < deadline:
            outcome = self._repeat(once)
        return outcome

    def _repeat(self, once: Callable[[], ExecutionOutcome]) -> ExecutionOutcome:
        """One repetition of a soak, in a measured window of its own (its conditions)."""
        from cmx_core.conditions.window import MeasuredWindow  # deferred: a soak only

        window = MeasuredWindow.start()
        outcome = once()
        primary = _primary(outcome)
        # not held open: a soak stays continuous, so only repetitions of 0.5 s or more are judged on CPU use
        self.repetitions.append(self._repetition(outcome, window.finish(at_least_s=0.0), _value(primary)))
        if self.measure is None:
            self.measure = _measure(primary)
        return outcome

    def _repetition(self, outcome: ExecutionOutcome, conditions: Conditions, metric: float | None) -> Repetition:
        from cmx_core.telemetry.soak import Repetition  # deferred: start-up: 12 modules not needed to start cmx

        assert self.telemetry is not None
        self.telemetry.sample()  # the tree's RSS as this repetition ends
        latest = self.telemetry.latest()
        rss = next((v for name, _, v in latest.points if name == "cmx_process_resident_memory_bytes"), 0.0) \
            if latest is not None else 0.0
        own = self.telemetry.own_bytes() + deep_size(self.repetitions)  # cmx's own: never the verdict's basis
        outside = conditions.outside_cores.value if conditions.outside_cores.known else None
        return Repetition(outcome.finished - outcome.started, rss, float(own), metric, outside,
                          tuple(w.cause for w in conditions.warnings))

    def fold(self, outcome: ExecutionOutcome) -> ExecutionOutcome:
        if self.telemetry is None:
            return outcome

        if outcome.nodes and all(node.status == "cached" for node in outcome.nodes):
            (self.request.run_dir / SERIES_FILE).unlink(missing_ok=True)  # nothing ran: nothing measured
            return outcome
        return replace(outcome, telemetry=self.section)  # the series file is named in the section

    def finish(self) -> None:
        if self.telemetry is None:
            return
        self.section.update(self.telemetry.stop())
        if self.soak_s is not None:
            from cmx_core.telemetry.soak import verdict  # deferred: start-up: 12 modules not needed to start cmx

            summary = {k: (m["value"], m["unit"], m["higher_is_better"]) for k, m in self.section["metrics"].items()}
            self.section["soak"] = verdict(self.repetitions, self.soak_s, summary, self.measure)


def primary_measure(outcome: ExecutionOutcome) -> Measure | None:
    """What the run's primary metric is (its result part's ``benchmark.primary_metric``), if any."""
    return _measure(_primary(outcome))


def primary_value(outcome: ExecutionOutcome) -> float | None:
    """The value of the run's primary metric in this repetition (None: none, or it failed)."""
    return _value(_primary(outcome))


def _measure(primary: tuple[str, Metric] | None) -> Measure | None:
    from cmx_core.telemetry.soak import Measure  # deferred: a soak only

    return Measure(primary[0], primary[1].unit, primary[1].higher_is_better) if primary is not None else None


def _value(primary: tuple[str, Metric] | None) -> float | None:
    value = primary[1].value if primary is not None else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _primary(outcome: ExecutionOutcome) -> tuple[str, Metric] | None:
    part = outcome.result_part() if outcome.error is None else None
    name = part.benchmark.get("primary_metric") if part is not None else None
    metric = part.metrics.get(name) if part is not None and isinstance(name, str) else None
    return (str(name), metric) if metric is not None else None


@contextmanager
def observed(request: ExecutionRequest, executor: str, settings: TelemetrySettings) -> Iterator[Observation]:
    """Sample the run while the body runs the executor (through the yielded
    :class:`Observation`)."""
    if settings.soak_s is not None and executor != "local":
        raise UsageError(f"--soak repeats the plan on the local executor only, not {executor}")
    if not settings.enabled or executor != "local":
        yield Observation(request, None, None)
        return

    telemetry = RunTelemetry(request.run_id, request.run_dir, settings)
    telemetry.start()
    observation = Observation(request, telemetry, settings.soak_s)
    try:
        with sampling(telemetry):
            yield observation
    finally:
        observation.finish()
