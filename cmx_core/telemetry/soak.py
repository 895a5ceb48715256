"""The verdict of a soak (``cmx run --soak DURATION``): the measured plan repeated with
telemetry on, then judged on memory growth, throughput drift and the GPUs' heat.

The judgement counts repetitions, not seconds, so it does not depend on how fast or how
loaded the machine is: memory growth is the least-squares slope of the workload's memory,
sampled at the end of each repetition, against the repetition's number (bytes per
repetition, the first :data:`WARMUP` repetitions left out). The workload's memory is the
process tree's resident memory less cmx's own (:mod:`.own`); cmx's own is reported beside
it (``own_memory_*``) and never makes the verdict; throughput drift
compares the median wall time of the last third of the repetitions with the first third's.
A verdict needs at least :data:`MIN_REPETITIONS` measured repetitions; with fewer it is
``inconclusive``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

WARMUP = 2
MIN_REPETITIONS = 5
LEAK_BYTES_PER_REPETITION = 256 * 1024
"""Growth above this (and above :data:`LEAK_FRACTION` of the first measured RSS per
repetition) is a leak: a steady step's RSS wanders by allocator noise, far below it."""
LEAK_FRACTION = 0.001
DRIFT_LIMIT = 0.5
"""A repetition that became 50 % slower (or faster) from the first third to the last is drift."""


@dataclass(frozen=True)
class Repetition:
    """One repetition of the plan: its wall time, the tree's RSS when it ended, and how much
    of that was cmx's own (:class:`.own.OwnMemory`; 0 where it was not measured)."""

    wall_s: float
    rss_bytes: float
    own_bytes: float = 0.0

    @property
    def workload_bytes(self) -> float:
        return self.rss_bytes - self.own_bytes


def slope(values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` against 0, 1, 2, ... (units per step)."""
    n = len(values)
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    den = sum((i - mean_x) ** 2 for i in range(n))
    return 0.0 if den == 0 else sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / den


def verdict(repetitions: Sequence[Repetition], duration_s: float,
            summary: Mapping[str, tuple[float, str, bool]] | None = None) -> dict[str, Any]:
    """The ``telemetry.soak`` section: ``verdict`` is ``pass``, ``fail`` (with ``reasons``)
    or ``inconclusive``."""
    measured = list(repetitions[WARMUP:])
    out: dict[str, Any] = {"duration_s": duration_s, "repetitions": len(repetitions),
                           "leak_threshold_bytes_per_repetition": LEAK_BYTES_PER_REPETITION,
                           "drift_limit": DRIFT_LIMIT}
    if len(measured) < MIN_REPETITIONS:
        out.update(verdict="inconclusive", reasons=[
            f"{len(repetitions)} repetitions in {duration_s:g} s: a verdict needs {WARMUP + MIN_REPETITIONS}"])
        return out
    growth = slope([r.workload_bytes for r in measured])
    threshold = max(LEAK_BYTES_PER_REPETITION, LEAK_FRACTION * measured[0].workload_bytes)
    third = max(1, len(measured) // 3)
    first = statistics.median(r.wall_s for r in measured[:third])
    last = statistics.median(r.wall_s for r in measured[-third:])
    drift = (last - first) / first if first > 0 else 0.0
    reasons = []
    if growth > threshold:
        reasons.append(f"memory grows {growth / 1024:.0f} KiB per repetition (threshold {threshold / 1024:.0f} KiB)")
    if abs(drift) > DRIFT_LIMIT:
        reasons.append(f"throughput drifted: a repetition takes {drift:+.0%} from the first third to the last")
    summary = summary or {}
    throttles = summary.get("gpu_throttle_events")
    if throttles is not None and throttles[0] > 0:
        reasons.append(f"the GPUs throttled {throttles[0]:g} times")
    out.update(memory_growth_bytes_per_repetition=growth, leak=growth > threshold,
               workload_memory_bytes=measured[-1].workload_bytes, own_memory_bytes=measured[-1].own_bytes,
               own_memory_growth_bytes_per_repetition=slope([r.own_bytes for r in measured]),
               tree_memory_growth_bytes_per_repetition=slope([r.rss_bytes for r in measured]),
               throughput_drift=drift,
               max_gpu_temperature_celsius=summary.get("gpu_temperature_max_celsius", (None,))[0],
               gpu_throttle_events=None if throttles is None else throttles[0],
               verdict="fail" if reasons else "pass", reasons=reasons)
    return out
