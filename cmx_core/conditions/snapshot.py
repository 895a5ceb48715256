"""One reading of everything that changes during a run, taken at the start and at the end of
the measured window (:mod:`cmx_core.conditions.window`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.conditions.cpufreq import boost, current_khz, governor
from cmx_core.conditions.cpustat import CpuTimes, cpu_times, load_average
from cmx_core.conditions.gpu import GpuState, gpus
from cmx_core.conditions.runtree import run_cpu_s
from cmx_core.conditions.throttle import throttle_count
from cmx_core.conditions.values import Read
from cmx_core.telemetry.nvml import NvmlApi


@dataclass(frozen=True)
class Snapshot:
    at: float
    """``time.monotonic()`` when read."""
    load: Read[tuple[float, float, float]]
    cpu: Read[CpuTimes]
    run_cpu_s: Read[float]
    governor: Read[str]
    boost: Read[bool]
    freq_khz: Read[tuple[int, ...]]
    throttle_count: Read[int]
    gpus: Read[tuple[GpuState, ...]]


def take(root: Path, cpus: Sequence[int], nvml: NvmlApi | None = None) -> Snapshot:
    """Read every changing source for the CPUs ``cpus`` the run has (the run is this
    process and its children: :mod:`cmx_core.conditions.runtree`). The slow sources (NVML) are read first and the CPU
    counters last, together with the clock, so that the window's edges line up."""
    gpu, governors, boosted = gpus(root, nvml), governor(root, cpus), boost(root)
    freq, throttled, load = current_khz(root, cpus), throttle_count(root, cpus), load_average(root)
    own = run_cpu_s() if root == Path("/") else Read[float](why="a recorded tree has no run")
    return Snapshot(time.monotonic(), load, cpu_times(root, cpus), own, governors, boosted, freq, throttled, gpu)
