"""Live exposition: ``cmx run --metrics-port PORT`` serves the run's latest round at
``http://127.0.0.1:PORT/metrics`` through ``prometheus_client``.

Every scrape answers the values of the sampler's last round (the same values ``telemetry.om``
holds for that round), so what Prometheus stores agrees with the run's own file. A scraper that accepts
OpenMetrics (Prometheus does) gets ``# UNIT`` beside ``# TYPE`` and ``# HELP``; the classic
text format has no place for a unit. The server
listens on the loopback interface (unless ``CMX_METRICS_ADDR`` names another address: a
Kubernetes pod's) and stops with the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from cmx_core.errors import UsageError
from cmx_core.telemetry.openmetrics import Round, family_of

HOST = "127.0.0.1"


class Sampled(Protocol):
    """What the exporter needs of the run's sampler (:class:`~.collector.RunTelemetry`)."""

    @property
    def base_labels(self) -> tuple[tuple[str, str], ...]: ...

    def latest(self) -> Round | None: ...

    def kind_of(self, name: str) -> str: ...


class _LatestRound:
    """A prometheus_client collector over the run's latest round."""

    def __init__(self, telemetry: Sampled) -> None:
        self._telemetry = telemetry

    def collect(self) -> Iterator[Any]:
        # deferred: prometheus_client only when this runs (76 modules)
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        latest = self._telemetry.latest()
        if latest is None:
            return
        base = self._telemetry.base_labels
        grouped: dict[str, list[tuple[tuple[tuple[str, str], ...], float]]] = {}
        for name, labels, value in latest.points:
            grouped.setdefault(name, []).append(((*base, *labels), value))
        for name, samples in grouped.items():
            family = family_of(name, self._telemetry.kind_of(name))
            # every label any sample of the family has (an application series' own, such as
            # rank, may be on some samples only); a sample without one gets "" (no label)
            keys = list(dict.fromkeys(k for labels, _ in samples for k, _ in labels))
            maker = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
            unit = family.unit if family.unit and name.endswith("_" + family.unit) else ""
            metric = maker(name, family.help, labels=keys, unit=unit)
            for labels, value in samples:
                given = dict(labels)
                metric.add_metric([given.get(k, "") for k in keys], value)
            yield metric


class Exporter:
    """The HTTP server of one run's ``/metrics``."""

    def __init__(self, telemetry: Sampled, port: int, host: str = HOST) -> None:
        # deferred: prometheus_client only when this runs (75 modules)
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_LatestRound(telemetry))
        try:
            started = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            raise UsageError(f"--metrics-port {port}: cannot listen on {host}:{port} ({err.strerror})") from None
        self._server = started[0] if isinstance(started, tuple) else None
        self.port = port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
