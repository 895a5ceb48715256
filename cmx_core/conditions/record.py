"""The ``conditions`` section of a result: a typed, frozen record of what the machine was
doing during the measured window, with :data:`BOUNDS` (what counts as quiet) so that a
verdict can compare two records like with like (docs/busy-machine.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmx_core.conditions.values import Read, from_json

VERSION = 1
BOUNDS: Mapping[str, float] = {
    "outside_cores": 0.25,
    "steal_cores": 0.10,
    "freq_spread": 0.10,
    "cpu_throttle_events": 0.0,
    "min_window_s": 0.5,
}
"""Quiet means at most: other processes' CPU use and steal time as a share of the run's
CPUs, the spread of the CPUs' current frequencies ((max - min) / max), and the CPU
thermal-throttle events during the window. CPU use is judged only over a window of at least
``min_window_s``: /proc/stat counts in ticks of 10 ms, too coarse for a shorter one."""


@dataclass(frozen=True)
class NoiseWarning:
    """One cause of noise: ``cause`` is a :data:`BOUNDS` key (or ``gpu_throttle``,
    ``governor``), ``message`` names it and says what to do."""

    cause: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"cause": self.cause, "message": self.message}


@dataclass(frozen=True)
class Conditions:
    window_s: float
    cpus: int
    """The CPUs the run could use (its affinity)."""
    load_before: Read[list[float]]
    load_after: Read[list[float]]
    run_cores: Read[float]
    """CPUs the run's own process tree used, on average over the window."""
    outside_cores: Read[float]
    """CPUs the other processes used on the run's CPUs, on average over the window."""
    steal_cores: Read[float]
    governor: Read[str]
    boost: Read[bool]
    freq_khz: Read[list[int]]
    """The lowest and highest current frequency seen on the run's CPUs."""
    freq_limits_khz: Read[list[int]]
    cpu_throttle_events: Read[int]
    gpu_throttle: Read[list[str]]
    """``gpuN:reason`` for every throttling reason seen at the start or the end."""
    gpu_persistence: Read[list[bool | None]]
    cpu_quota: Read[float]
    """CPUs of the cgroup's quota; 0.0 when it has none."""
    numa_balancing: Read[int]
    randomize_va_space: Read[int]
    isolated_cpus: Read[list[int]]
    threads: Mapping[str, Read[Any]] = field(default_factory=dict)
    warnings: tuple[NoiseWarning, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": VERSION, "window_s": round(self.window_s, 6), "cpus": self.cpus}
        for name in READS:
            data[name] = getattr(self, name).to_json()
        data["threads"] = {name: read.to_json() for name, read in self.threads.items()}
        data["bounds"] = dict(BOUNDS)
        data["warnings"] = [w.to_json() for w in self.warnings]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Conditions:
        reads = {name: from_json(data.get(name)) for name in READS}
        return cls(window_s=float(data.get("window_s") or 0.0), cpus=int(data.get("cpus") or 0), **reads,
                   threads={str(k): from_json(v) for k, v in dict(data.get("threads") or {}).items()},
                   warnings=tuple(NoiseWarning(str(w["cause"]), str(w["message"]))
                                  for w in data.get("warnings") or ()))

    def beyond_bounds(self) -> tuple[str, ...]:
        """The :data:`BOUNDS` keys this record exceeds (what a verdict compares)."""
        return tuple(sorted({w.cause for w in self.warnings}))


READS = ("load_before", "load_after", "run_cores", "outside_cores", "steal_cores", "governor", "boost", "freq_khz",
         "freq_limits_khz", "cpu_throttle_events", "gpu_throttle", "gpu_persistence", "cpu_quota",
         "numa_balancing", "randomize_va_space", "isolated_cpus")
"""The :class:`Conditions` fields that are a :class:`Read`, in the section's order."""
