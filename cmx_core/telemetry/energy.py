"""Joules and watts from a sampling session, and the meter the LoadGen child uses.

Per device, energy is the energy counter's increase between the first and the last round
(NVML total energy, amd-smi energy accumulator, RAPL ``energy_uj``); a device without a
counter gets the trapezoid integral of its power samples, labelled ``estimated``. The
average power is the total energy over the window. The child's report key ``energy`` is
:meth:`EnergyReport.as_dict`; :mod:`cmx_mlperf.power.cost` turns it into the ``cost`` section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from cmx_core.telemetry.amd import open_amd
from cmx_core.telemetry.nvml import NvmlSource
from cmx_core.telemetry.rapl import RaplSource
from cmx_core.telemetry.reading import PowerSource, Unavailable
from cmx_core.telemetry.sampler import SERIES_FILE, PowerSampler, Session, write_series

DEFAULT_PERIOD_MS = 100.0
COUNTER = "energy counter"
INTEGRATED = "integrated power samples (trapezoid)"


@dataclass(frozen=True)
class EnergyReport:
    """The energy of one LoadGen test; ``energy_j`` is ``None`` with ``energy_reason``."""

    source: str
    devices: tuple[str, ...] = ()
    energy_j: float | None = None
    avg_power_w: float | None = None
    duration_s: float | None = None
    samples: int = 0
    method: str | None = None
    estimated: bool = False
    per_device_j: dict[str, float] = field(default_factory=dict)
    series: str | None = None
    energy_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["devices"] = list(self.devices)
        if self.energy_j is None:  # nothing measured: no method, no estimate, no per-device split
            for key in ("method", "estimated", "per_device_j"):
                out.pop(key)
        return out


def _device_energy(session: Session, index: int) -> tuple[float, str] | None:
    """(joules, method) of device ``index``, or ``None`` when it has neither counter nor power."""
    readings = [rnd.readings[index] for rnd in session.rounds]
    first, last = readings[0].energy_j, readings[-1].energy_j
    if first is not None and last is not None:
        return last - first, COUNTER
    points = [(rnd.t_s, rnd.readings[index].power_w) for rnd in session.rounds
              if rnd.readings[index].power_w is not None]
    if len(points) < 2:
        return None
    joules = sum((t1 - t0) * ((p0 or 0.0) + (p1 or 0.0)) / 2 for (t0, p0), (t1, p1) in pairwise(points))
    return joules, INTEGRATED


def summarize(session: Session) -> EnergyReport:
    """The :class:`EnergyReport` of a finished session."""
    base = EnergyReport(session.source, session.devices, samples=len(session.rounds))
    if session.error is not None:
        return _null(base, f"energy not measured over the whole test: {session.error}")
    if len(session.rounds) < 2:
        return _null(base, "fewer than two power readings")
    duration = session.rounds[-1].t_s - session.rounds[0].t_s
    per_device: dict[str, float] = {}
    methods = set()
    for index, device in enumerate(session.devices):
        measured = _device_energy(session, index)
        if measured is None:
            return _null(base, f"{device}: no energy counter and fewer than two power readings")
        per_device[device] = measured[0]
        methods.add(measured[1])
    total = sum(per_device.values())
    method = methods.pop() if len(methods) == 1 else f"{COUNTER} + {INTEGRATED}"
    return EnergyReport(session.source, session.devices, total, total / duration if duration > 0 else None,
                        duration, len(session.rounds), method, INTEGRATED in method, per_device)


def _null(base: EnergyReport, reason: str) -> EnergyReport:
    return EnergyReport(base.source, base.devices, samples=base.samples, energy_reason=reason)


def _nvml() -> PowerSource:
    return NvmlSource()


def _amd() -> PowerSource:
    return open_amd()


def _rapl() -> PowerSource:
    return RaplSource()


#: The sources in order of preference: the accelerators first, the CPU package last.
OPENERS: tuple[Callable[[], PowerSource], ...] = (_nvml, _amd, _rapl)


def open_source(openers: tuple[Callable[[], PowerSource], ...] = OPENERS) -> tuple[PowerSource | None, str]:
    """The first source that opens, or ``None`` and why each one could not."""
    reasons = []
    for opener in openers:
        try:
            return opener(), ""
        except Unavailable as err:
            reasons.append(str(err))
    return None, "no power source: " + "; ".join(reasons)


class Meter:
    """What :func:`cmx_mlperf.harness.child.run_test` wraps around ``StartTest``: open the
    source early (:meth:`open`), :meth:`start` right before the test, :meth:`stop` right after."""

    def __init__(self, period_ms: float | None, opener: Callable[[], tuple[PowerSource | None, str]] = open_source,
                 clock: Callable[[], float] | None = None) -> None:
        self.period_s = (DEFAULT_PERIOD_MS if period_ms is None else period_ms) / 1000.0
        self._opener = opener
        self._clock = clock
        self._sampler: PowerSampler | None = None
        self._reason = ""

    @classmethod
    def open(cls, period_ms: float | None) -> Meter:
        meter = cls(period_ms)
        meter.prepare()
        return meter

    def prepare(self) -> None:
        if self.period_s <= 0:
            self._reason = "power sampling is off (power_sample_ms: 0)"
            return
        source, self._reason = self._opener()
        if source is not None:
            clock = {} if self._clock is None else {"clock": self._clock}
            self._sampler = PowerSampler(source, self.period_s, **clock)

    def start(self) -> None:
        if self._sampler is not None:
            self._sampler.start()

    def stop(self, out_dir: Path) -> dict[str, Any]:
        """Stop sampling, write :data:`SERIES_FILE` into ``out_dir``, return the report."""
        if self._sampler is None:
            return EnergyReport("none", energy_reason=self._reason).as_dict()
        session = self._sampler.stop()
        self._sampler.source.close()
        report = summarize(session)
        if session.rounds:
            write_series(session, out_dir / SERIES_FILE)
            report = replace(report, series=SERIES_FILE)
        return report.as_dict()
