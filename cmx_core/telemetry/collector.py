"""The run sampler: one background thread beside every run, every ``interval_s`` seconds.

Each round reads the run's process tree and the machine (:mod:`.probes`, psutil), the GPUs
and CPU packages (:mod:`.devices`) and the steps' own series (:mod:`.appmetrics`). The
first round is taken in :meth:`RunTelemetry.start`, the last in :meth:`RunTelemetry.stop`,
so the series cover the whole run. A probe whose read fails is dropped from later rounds
and its reason said once (``telemetry.unavailable``). Each round goes to disk as it is taken
(:mod:`.spool`); memory holds the last :data:`WINDOW_ROUNDS` rounds and running summaries
(:mod:`.summary`), so a day-long run costs no more memory than a minute's.
:meth:`RunTelemetry.stop` writes ``telemetry.om`` (:mod:`.openmetrics`) and returns the
result's ``telemetry`` section.

Settings (docs/telemetry.md): ``CMX_TELEMETRY`` (``0``/``off``/``false`` turns it off, as
``cmx run --no-telemetry`` does), ``CMX_TELEMETRY_INTERVAL_S`` (default 1, as
``--telemetry-interval``), ``CMX_METRICS_PORT`` (as ``--metrics-port``) and
``CMX_METRICS_ADDR`` (where ``/metrics`` listens; default ``127.0.0.1``).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from cmx_core.errors import UsageError
from cmx_core.providers.types import MetricsSink
from cmx_core.telemetry import openmetrics
from cmx_core.telemetry.appmetrics import FILE_NAME, AppSeries, StepMetrics
from cmx_core.telemetry.devices import EVERY_SOURCE, DeviceProbe, PowerOpeners, open_probes
from cmx_core.telemetry.exposition import Exporter
from cmx_core.telemetry.journal import ENV_JOURNAL, Journal
from cmx_core.telemetry.live import BOARD
from cmx_core.telemetry.names import app_series
from cmx_core.telemetry.openmetrics import Round
from cmx_core.telemetry.own import deep_size
from cmx_core.telemetry.probes import Machine, Point, ProcessTree
from cmx_core.telemetry.reading import one_line
from cmx_core.telemetry.spool import SeriesSpool
from cmx_core.telemetry.summary import RunningSummary

DEFAULT_INTERVAL_S = 1.0
MIN_INTERVAL_S = 0.05
WINDOW_ROUNDS = 16
"""The latest rounds the sampler keeps in memory (live views: ``/metrics``, the progress
line, the soak's repetitions); every round goes to the spool (:mod:`.spool`) as it is taken."""
_OFF = ("0", "off", "false", "no")


@dataclass(frozen=True)
class TelemetrySettings:
    """Whether the run is sampled, how often, and the port of its live ``/metrics``."""

    enabled: bool = True
    interval_s: float = DEFAULT_INTERVAL_S
    metrics_port: int | None = None
    soak_s: float | None = None
    """``--soak DURATION``: repeat the plan for this long and judge it (:mod:`.soak`)."""
    metrics_addr: str = "127.0.0.1"
    """The address ``/metrics`` listens on: loopback, unless ``CMX_METRICS_ADDR`` says
    otherwise (a Kubernetes pod, whose network is its own, sets ``0.0.0.0``)."""
    journal: Path | None = None
    """``CMX_APP_JOURNAL``: a file each reported application value is appended to as it
    arrives (:mod:`.journal`), for a process that watches the run."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TelemetrySettings:
        env = os.environ if env is None else env
        enabled = env.get("CMX_TELEMETRY", "1").strip().lower() not in _OFF
        interval = check_interval(env.get("CMX_TELEMETRY_INTERVAL_S") or str(DEFAULT_INTERVAL_S),
                                  "CMX_TELEMETRY_INTERVAL_S")
        port_text = env.get("CMX_METRICS_PORT")
        port = check_port(port_text, "CMX_METRICS_PORT") if port_text else None
        addr = env.get("CMX_METRICS_ADDR") or "127.0.0.1"
        journal = Path(env[ENV_JOURNAL]) if env.get(ENV_JOURNAL) else None
        # a soak is asked for on the command line only
        return cls(enabled, interval, port, metrics_addr=addr, journal=journal)


def check_interval(text: str | float, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a number of seconds") from None
    if not value >= MIN_INTERVAL_S or value == float("inf"):
        raise UsageError(f"{where}: the sampling interval must be at least {MIN_INTERVAL_S} s, not {text}")
    return value


def check_port(text: str | int, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise UsageError(f"{where}: a port is 1-65535, not {port}")
    return port


class Probe(Protocol):
    problems: list[str]

    def read(self) -> list[Point]: ...


class RunTelemetry:
    """The sampler of one run (see the module docstring). ``clock`` gives Unix time."""

    def __init__(self, run_id: str, run_dir: Path, settings: TelemetrySettings, *,
                 root_pid: int | None = None, clock: Callable[[], float] = time.time,
                 openers: PowerOpeners = EVERY_SOURCE) -> None:
        self.run_id = run_id
        self.run_dir = run_dir
        self.settings = settings
        self.node = socket.gethostname()
        self.app = AppSeries()
        self._clock = clock
        self._root_pid = root_pid
        self._openers = openers
        self._probes: list[tuple[str, Any]] = []
        self._devices: list[DeviceProbe] = []
        self.window: deque[Round] = deque(maxlen=WINDOW_ROUNDS)
        self.samples = 0
        self.summary = RunningSummary()
        self._spool: SeriesSpool | None = None
        self._spool_failed: SeriesSpool | None = None
        self._kinds: dict[str, str] = {}
        self.unavailable: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.exporter: Any = None

    @property
    def base_labels(self) -> tuple[tuple[str, str], ...]:
        return (("run", self.run_id), ("node", self.node))

    def start(self) -> None:
        """Open the probes, take the first round, start the thread (and the exporter)."""
        monotonic = time.monotonic
        self._probes = [("process", ProcessTree(self._root_pid, monotonic)), ("machine", Machine())]
        self._devices, problems = open_probes(self._openers.gpu, self._openers.rapl)
        self.unavailable += problems
        self._probes += [(d.source.name, d) for d in self._devices]
        self.sources = ["psutil " + psutil.__version__, *(d.source.name for d in self._devices)]
        self._spool = SeriesSpool(self.run_dir / openmetrics.SERIES_FILE, self.base_labels)
        self._open_journal()
        self.sample()
        if self.settings.metrics_port is not None:
            try:
                self.exporter = Exporter(self, self.settings.metrics_port, self.settings.metrics_addr)
            except BaseException:
                for device in self._devices:  # the run does not start: give the libraries back
                    device.close()
                raise
        self._thread = threading.Thread(target=self._loop, name="cmx-telemetry", daemon=True)
        self._thread.start()

    def _open_journal(self) -> None:
        if self.settings.journal is None:
            return
        try:
            self.app.journal = Journal(self.settings.journal)
        except OSError as err:  # the run goes on; whoever watches it sees no journal
            self.unavailable.append(f"{ENV_JOURNAL} {self.settings.journal}: not written: {err.strerror}")

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.interval_s):
            self.sample()

    def sample(self) -> None:
        """One round now (the thread's body)."""
        with self._lock:
            t = self._clock()
            points: list[Point] = []
            for name, probe in list(self._probes):
                try:
                    points += probe.read()
                except Exception as err:  # noqa: BLE001 - a failed read drops the probe, said once
                    self._probes.remove((name, probe))
                    self.unavailable.append(f"{name}: read failed, not sampled after {t:.3f}: {one_line(err)}")
                self._take_problems(probe)
            for value in self.app.snapshot():
                name, factor = app_series(value.name)
                self._kinds.setdefault(name, value.kind)
                points.append((name, (("step", value.step), *value.labels), value.value * factor))
            self._take_problems(self.app)
            self.samples += 1
            points.append(("cmx_telemetry_samples", (), float(self.samples)))
            taken = Round(t, tuple(points))
            self.window.append(taken)
            self.summary.add(taken.points)
            if self._spool is not None:
                try:
                    self._spool.add(t, taken.points, self._kinds)
                except OSError as err:  # a full disk: the series file stops here, and says so
                    self._spool.drop_pending()
                    self._spool_failed, self._spool = self._spool, None
                    self.unavailable.append(f"{openmetrics.SERIES_FILE}: samples after {t:.3f} not written: "
                                            f"{one_line(err)}")

    def _take_problems(self, probe: Any) -> None:
        while probe.problems:
            line = probe.problems.pop(0)
            if line not in self.unavailable:
                self.unavailable.append(line)

    def latest(self) -> Round | None:
        return self.window[-1] if self.window else None

    def own_bytes(self) -> int:
        """What the sampler keeps in memory now (:func:`.own.deep_size`): bounded, however
        long the run (the window, the summaries, one entry per series, one batch of lines)."""
        with self._lock:
            return deep_size(self.window, self.summary, self._spool, self._kinds, self.unavailable,
                             self.app.snapshot())

    def kind_of(self, name: str) -> str:
        return self._kinds.get(name, "gauge")

    def step_metrics(self, node_id: str, step_id: str, log_dir: Path) -> StepMetrics:
        return StepMetrics(self.app, f"{node_id}/{step_id}", log_dir / FILE_NAME)

    def stop(self) -> dict[str, Any]:
        """The last round; close everything; write the series; the ``telemetry`` section."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        if self.app.journal is not None:
            self.app.journal.close()
        if self.exporter is not None:
            self.exporter.close()
        for device in self._devices:
            device.close()
        spool = self._spool or self._spool_failed
        assert spool is not None, "stop() before start()"
        metrics = {name: {"value": v, "unit": unit, "higher_is_better": better}
                   for name, (v, unit, better) in self.summary.result(spool.values).items()}
        try:
            spool.finish()
        except OSError as err:
            self.unavailable.append(f"{openmetrics.SERIES_FILE}: not written: {one_line(err)}")
        section: dict[str, Any] = {
            "interval_s": self.settings.interval_s, "samples": self.samples,
            "series": openmetrics.SERIES_FILE, "sources": self.sources,
            "devices": [dev for d in self._devices for dev in d.devices],
            "unavailable": list(self.unavailable), "metrics": metrics,
        }
        if self.exporter is not None:
            section["metrics_port"] = self.exporter.port
        return section


_ACTIVE: list[RunTelemetry] = []


@contextmanager
def sampling(telemetry: RunTelemetry) -> Iterator[RunTelemetry]:
    """Make ``telemetry`` the run's: steps started meanwhile report into it."""
    _ACTIVE.append(telemetry)
    try:
        with BOARD.sampled_by(telemetry.app):
            yield telemetry
    finally:
        _ACTIVE.remove(telemetry)


def step_metrics(node_id: str, step_id: str, log_dir: Path) -> MetricsSink:
    """The metrics sink of a step about to run. Without telemetry what it reports (and what a
    shell step writes to ``CMX_METRICS_FILE``) feeds only the live progress line."""
    if not _ACTIVE:
        return StepMetrics(BOARD.own, f"{node_id}/{step_id}", log_dir / FILE_NAME)
    return _ACTIVE[-1].step_metrics(node_id, step_id, log_dir)


@dataclass(frozen=True)
class Usage:
    """The run's process tree in the sampler's latest round."""

    cpu_cores: float | None
    rss_bytes: float | None


def latest_usage() -> Usage | None:
    """What the active run sampler last read of the run's CPU and memory (None when none is)."""
    latest = _ACTIVE[-1].latest() if _ACTIVE else None
    if latest is None:
        return None
    found = {name: value for name, labels, value in latest.points if not labels}
    return Usage(found.get("cmx_process_cpu_cores"), found.get("cmx_process_resident_memory_bytes"))
