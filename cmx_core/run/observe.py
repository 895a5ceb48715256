"""The run's telemetry around its executor: start the sampler, let the steps report into it,
stop it, and fold its ``telemetry`` section (which names the series file) into the outcome.

A run whose every node was served from the cache ran nothing: it gets no ``telemetry``
section and no series file (so the warm-run replay, which skips the engine, writes the same
result). Only the ``local`` executor is sampled here: a remote executor's far side runs
``cmx run --lock``, which samples the machine the steps really run on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cmx_core.plugins.registry import ExecutionRequest
    from cmx_core.providers.types import ExecutionOutcome
    from cmx_core.telemetry.collector import TelemetrySettings

Fold = Callable[["ExecutionOutcome"], "ExecutionOutcome"]


def _unchanged(outcome: ExecutionOutcome) -> ExecutionOutcome:
    return outcome


def check_settings(settings: TelemetrySettings | None) -> TelemetrySettings:
    """The run's settings (from the environment when not given); a ``--metrics-port``
    already in use is refused now, before anything runs (exit 2)."""
    from cmx_core.telemetry.collector import TelemetrySettings

    chosen = settings if settings is not None else TelemetrySettings.from_env()
    if chosen.enabled and chosen.metrics_port is not None:
        _check_free(chosen.metrics_port)
    return chosen


def _check_free(port: int) -> None:
    import socket

    from cmx_core.errors import UsageError
    from cmx_core.telemetry.exposition import HOST

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as err:
            raise UsageError(f"--metrics-port {port}: cannot listen on {HOST}:{port} ({err.strerror})") from None


@contextmanager
def observed(request: ExecutionRequest, executor: str, settings: TelemetrySettings) -> Iterator[Fold]:
    """Sample the run while the body runs the executor; yields the function that adds the
    telemetry to the outcome (valid once the body has finished)."""
    if not settings.enabled or executor != "local":
        yield _unchanged
        return
    from cmx_core.telemetry.collector import RunTelemetry, sampling
    from cmx_core.telemetry.openmetrics import SERIES_FILE

    telemetry = RunTelemetry(request.run_id, request.run_dir, settings)
    telemetry.start()
    section: dict[str, object] = {}

    def fold(outcome: ExecutionOutcome) -> ExecutionOutcome:
        if outcome.nodes and all(node.status == "cached" for node in outcome.nodes):
            (request.run_dir / SERIES_FILE).unlink(missing_ok=True)  # nothing ran: nothing measured
            return outcome
        return replace(outcome, telemetry=section)  # the series file is named in the section

    try:
        with sampling(telemetry):
            yield fold
    finally:
        section.update(telemetry.stop())
