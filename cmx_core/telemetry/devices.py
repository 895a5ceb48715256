"""GPUs (NVML, amd-smi) and CPU packages (RAPL) as run-sampler points.

The power sources of :mod:`cmx_core.telemetry.energy` are opened each on its own (a machine
may have both an NVIDIA GPU and RAPL); one that does not open is named once in the run's
``telemetry.unavailable`` with its reason. Energy series count from the first round of the
run (the device counters' origins mean nothing); a device without an energy counter has no
energy series (the sampler does not estimate one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cmx_core.telemetry.amd import open_amd
from cmx_core.telemetry.probes import Point
from cmx_core.telemetry.rapl import RaplSource
from cmx_core.telemetry.reading import (
    THROTTLING,
    PowerSource,
    Reading,
    Unavailable,
    one_line,
    require_nvidia_driver,
)

MIB = 1024 * 1024


def gpu_index(device: str) -> str:
    """``gpu0:NVIDIA H200`` -> ``0``."""
    head = device.split(":", 1)[0]
    return head[3:] if head.startswith("gpu") else head


class DeviceProbe:
    """One opened power source. ``kind`` is ``gpu`` (NVML, amd-smi) or ``rapl``."""

    def __init__(self, source: PowerSource, kind: str) -> None:
        self.source = source
        self.kind = kind
        self._first: dict[str, float] = {}
        self._throttled: dict[str, bool] = {}
        self._events: dict[str, int] = {}
        self.problems: list[str] = []

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(self.source.devices)

    def read(self) -> list[Point]:
        points: list[Point] = []
        for reading in self.source.read():
            points += self._rapl(reading) if self.kind == "rapl" else self._gpu(reading)
        return points

    def _energy(self, reading: Reading) -> float | None:
        if reading.energy_j is None:
            return None
        return reading.energy_j - self._first.setdefault(reading.device, reading.energy_j)

    def _rapl(self, reading: Reading) -> list[Point]:
        energy = self._energy(reading)
        return [] if energy is None else [("cmx_node_cpu_energy_joules", (("domain", reading.device),), energy)]

    def _gpu(self, r: Reading) -> list[Point]:
        labels = (("gpu", gpu_index(r.device)),)
        points: list[Point] = []
        values = (("cmx_gpu_utilization_ratio", None if r.util_pct is None else r.util_pct / 100.0),
                  ("cmx_gpu_memory_used_bytes", None if r.mem_used_mib is None else r.mem_used_mib * MIB),
                  ("cmx_gpu_power_watts", r.power_w), ("cmx_gpu_energy_joules", self._energy(r)),
                  ("cmx_gpu_temperature_celsius", r.temperature_c))
        points += [(name, labels, value) for name, value in values if value is not None]
        if r.throttle_reasons is not None:
            now = bool(r.throttle_reasons & THROTTLING)
            if now and not self._throttled.get(r.device, False):
                self._events[r.device] = self._events.get(r.device, 0) + 1
            self._throttled[r.device] = now
            points.append(("cmx_gpu_throttle_events", labels, float(self._events.get(r.device, 0))))
        return points

    def close(self) -> None:
        self.source.close()


def _nvml() -> PowerSource:
    require_nvidia_driver()
    from cmx_core.telemetry.nvml import NvmlSource  # deferred: start-up: 4 modules not needed to start cmx

    return NvmlSource()


def _amd() -> PowerSource:
    return open_amd()


def _rapl() -> PowerSource:
    return RaplSource()


#: GPUs through NVML, else amd-smi; the CPU packages through RAPL.
GPU_OPENERS: tuple[Callable[[], PowerSource], ...] = (_nvml, _amd)
RAPL_OPENERS: tuple[Callable[[], PowerSource], ...] = (_rapl,)


@dataclass(frozen=True)
class PowerOpeners:
    """The power sources a run's sampler tries, each kind in order: the GPUs' and the CPU
    packages' (RAPL). An empty kind is not asked for (a test gives its own stand-ins)."""

    gpu: tuple[Callable[[], PowerSource], ...] = GPU_OPENERS
    rapl: tuple[Callable[[], PowerSource], ...] = RAPL_OPENERS


EVERY_SOURCE = PowerOpeners()
"""Every kind of power source, the real openers."""


def open_probes(gpu: tuple[Callable[[], PowerSource], ...] = GPU_OPENERS,
                rapl: tuple[Callable[[], PowerSource], ...] = RAPL_OPENERS) -> tuple[list[DeviceProbe], list[str]]:
    """The probes that open, and a line for each kind that could not (with every reason)."""
    probes: list[DeviceProbe] = []
    problems: list[str] = []
    for kind, openers in (("gpu", gpu), ("rapl", rapl)):
        if not openers:  # that kind is not asked for
            continue
        reasons = []
        for opener in openers:
            try:
                probes.append(DeviceProbe(opener(), kind))
                break
            except Unavailable as err:
                reasons.append(str(err))
            except Exception as err:  # noqa: BLE001 - a broken driver is a reason, not a failed run
                reasons.append(one_line(err))
        else:
            what = "GPU" if kind == "gpu" else "CPU energy"
            problems.append(f"{what}: " + "; ".join(reasons))
    return probes, problems
