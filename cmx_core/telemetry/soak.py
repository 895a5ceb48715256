"""The verdict of a soak (``cmx run --soak DURATION``): the measured plan repeated with
telemetry on, then judged on memory growth, throughput drift and the GPUs' heat.

The judgement counts repetitions, not seconds, so it does not depend on how fast or how
loaded the machine is: memory growth is the least-squares slope of the workload's memory,
sampled at the end of each repetition, against the repetition's number (bytes per
repetition, the first :data:`WARMUP` repetitions left out). The workload's memory is the
process tree's resident memory less cmx's own (:mod:`.own`); cmx's own is reported beside
it (``own_memory_*``) and never makes the verdict. Drift compares the median of the
workload's own metric (the result's primary metric, each repetition's; its wall time when the
run has none) over the last third of the repetitions with the first third's, and each third's
conditions (the machine's other load, noise warnings: :mod:`cmx_core.conditions`) go beside
it: a drift while either third was not quiet is ``inconclusive``, never a ``fail``, since the
machine rather than the system under test may have moved. A verdict needs at least
:data:`MIN_REPETITIONS` measured repetitions; with fewer it is ``inconclusive``.
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
class Measure:
    """What drift is judged on: the run's primary metric, or :data:`WALL`."""

    name: str
    unit: str
    higher_is_better: bool


WALL = Measure("wall_s", "s", False)


@dataclass(frozen=True)
class Repetition:
    """One repetition of the plan: its wall time, the tree's RSS when it ended, how much of
    that was cmx's own (:class:`.own.OwnMemory`; 0 where it was not measured), the run's
    primary metric in it (None: the run reports none), and its conditions: the CPUs other
    processes used meanwhile (None: not read) and the causes of its noise warnings."""

    wall_s: float
    rss_bytes: float
    own_bytes: float = 0.0
    metric: float | None = None
    outside_cores: float | None = None
    noise: tuple[str, ...] = ()

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
            summary: Mapping[str, tuple[float, str, bool]] | None = None,
            measure: Measure | None = None) -> dict[str, Any]:
    """The ``telemetry.soak`` section: ``verdict`` is ``pass``, ``fail`` (with ``reasons``)
    or ``inconclusive`` (with ``reasons``); drift is judged on ``measure`` when every
    measured repetition has its value, else on the wall time."""
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
    drift = _drift(measured, measure)
    reasons, doubts = [], []
    if growth > threshold:
        reasons.append(f"memory grows {growth / 1024:.0f} KiB per repetition (threshold {threshold / 1024:.0f} KiB)")
    if abs(drift["change"]) > DRIFT_LIMIT:
        moved = _drift_text(drift)
        noisy = [name.replace("_", " ") for name in ("first_third", "last_third") if drift[name]["noisy_repetitions"]]
        if noisy:
            doubts.append(f"{moved}, but the machine was not quiet in the {' and the '.join(noisy)} "
                          f"({_conditions_text(drift)}): rerun on a quiet machine to judge it")
        else:
            reasons.append(moved)
    summary = summary or {}
    throttles = summary.get("gpu_throttle_events")
    if throttles is not None and throttles[0] > 0:
        reasons.append(f"the GPUs throttled {throttles[0]:g} times")
    out.update(memory_growth_bytes_per_repetition=growth, leak=growth > threshold,
               workload_memory_bytes=measured[-1].workload_bytes, own_memory_bytes=measured[-1].own_bytes,
               own_memory_growth_bytes_per_repetition=slope([r.own_bytes for r in measured]),
               tree_memory_growth_bytes_per_repetition=slope([r.rss_bytes for r in measured]),
               throughput_drift=drift["change"], drift=drift,
               max_gpu_temperature_celsius=summary.get("gpu_temperature_max_celsius", (None,))[0],
               gpu_throttle_events=None if throttles is None else throttles[0],
               verdict="fail" if reasons else ("inconclusive" if doubts else "pass"), reasons=reasons + doubts)
    return out


def _drift(measured: Sequence[Repetition], measure: Measure | None) -> dict[str, Any]:
    """The change of the judged measure's median from the first third to the last, with
    each third's conditions."""
    judged = measure if measure is not None and all(r.metric is not None for r in measured) else WALL
    values = [r.wall_s if judged is WALL else float(r.metric or 0.0) for r in measured]
    third = max(1, len(measured) // 3)
    first, last = statistics.median(values[:third]), statistics.median(values[-third:])
    return {"metric": judged.name, "unit": judged.unit, "higher_is_better": judged.higher_is_better,
            "first_third_median": first, "last_third_median": last,
            "change": (last - first) / first if first > 0 else 0.0,
            "first_third": _conditions(measured[:third]), "last_third": _conditions(measured[-third:])}


def _conditions(part: Sequence[Repetition]) -> dict[str, Any]:
    outside = [r.outside_cores for r in part if r.outside_cores is not None]
    causes = sorted({cause for r in part for cause in r.noise})
    return {"repetitions": len(part), "outside_cores_median": statistics.median(outside) if outside else None,
            "noisy_repetitions": sum(1 for r in part if r.noise), "noise": causes}


def _drift_text(drift: Mapping[str, Any]) -> str:
    if drift["metric"] == WALL.name:
        return f"throughput drifted: a repetition takes {drift['change']:+.0%} from the first third to the last"
    return f"throughput drifted: {drift['metric']} moved {drift['change']:+.0%} from the first third to the last"


def _conditions_text(drift: Mapping[str, Any]) -> str:
    parts = []
    for name in ("first_third", "last_third"):
        third = drift[name]
        load = third["outside_cores_median"]
        parts.append(f"{name.replace('_', ' ')}: {third['noisy_repetitions']} of {third['repetitions']} noisy"
                     + (f" ({', '.join(third['noise'])})" if third["noise"] else "")
                     + (f", other processes {load:.2f} cores" if load is not None else ""))
    return "; ".join(parts)
