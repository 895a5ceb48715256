"""The measured window: a :class:`~cmx_core.conditions.snapshot.Snapshot` at its start and
one at its end make the run's :class:`~cmx_core.conditions.record.Conditions`, judged
(:mod:`cmx_core.conditions.judge`). Its cost is two readings of a few dozen small procfs and
sysfs files (and NVML where present), not a sampler: ``benchmarks/bench_conditions.py``."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cmx_core.conditions.cpufreq import limits_khz
from cmx_core.conditions.cpustat import online_cpus
from cmx_core.conditions.judge import judge
from cmx_core.conditions.kernel import cpu_quota, isolated_cpus, numa_balancing, randomize_va_space
from cmx_core.conditions.record import BOUNDS, Conditions
from cmx_core.conditions.snapshot import Snapshot, take
from cmx_core.conditions.threads import thread_settings
from cmx_core.conditions.values import Read, known, unknown
from cmx_core.telemetry.nvml import NvmlApi


class MeasuredWindow:
    """``window = MeasuredWindow.start()``; the run; ``window.finish()``."""

    def __init__(self, root: Path, cpus: Sequence[int], first: Snapshot, nvml: NvmlApi | None) -> None:
        self.root, self.cpus, self.first, self.nvml = root, tuple(cpus), first, nvml

    @classmethod
    def start(cls, root: Path = Path("/"), nvml: NvmlApi | None = None) -> MeasuredWindow:
        cpus = online_cpus(root)
        return cls(root, cpus, take(root, cpus, nvml), nvml)

    def finish(self, env: Mapping[str, str] | None = None, at_least_s: float = BOUNDS["min_window_s"]) -> Conditions:
        """The judged record of the window from its start to now, held open until it spans
        ``at_least_s``: /proc/stat's 10 ms ticks cannot judge a shorter one, and a run too
        short to judge would otherwise count as quiet however busy the machine was (so a
        sub-second run waits up to 0.5 s more, idle, while the machine is watched)."""
        last = take(self.root, self.cpus, self.nvml)
        if self.root == Path("/") and last.at - self.first.at < at_least_s:
            time.sleep(at_least_s - (last.at - self.first.at))
            last = take(self.root, self.cpus, self.nvml)
        record = conditions(self.root, self.cpus, self.first, last, os.environ if env is None else env)
        return replace(record, warnings=judge(record))


def conditions(root: Path, cpus: Sequence[int], first: Snapshot, last: Snapshot,
               env: Mapping[str, str]) -> Conditions:
    """The unjudged record of the window between two snapshots."""
    window = max(last.at - first.at, 1e-9)
    run = _delta(first.run_cpu_s, last.run_cpu_s)
    busy = _delta(first.cpu.map(lambda t: t.busy_s), last.cpu.map(lambda t: t.busy_s))
    steal = _delta(first.cpu.map(lambda t: t.steal_s), last.cpu.map(lambda t: t.steal_s))
    outside = _outside(busy, run)
    return Conditions(
        window_s=window, cpus=len(cpus), load_before=first.load.map(list), load_after=last.load.map(list),
        run_cores=run.map(lambda s: round(s / window, 3)), outside_cores=outside.map(lambda s: round(s / window, 3)),
        steal_cores=steal.map(lambda s: round(s / window, 3)), governor=first.governor, boost=first.boost,
        freq_khz=_freq_range(first.freq_khz, last.freq_khz), freq_limits_khz=limits_khz(root, cpus).map(list),
        cpu_throttle_events=_delta(first.throttle_count, last.throttle_count).map(int),
        gpu_throttle=_gpu_throttle(first, last), gpu_persistence=last.gpus.map(lambda g: [s.persistence for s in g]),
        cpu_quota=cpu_quota(root), numa_balancing=numa_balancing(root), randomize_va_space=randomize_va_space(root),
        isolated_cpus=isolated_cpus(root).map(list), threads=thread_settings(env),
    )


def _delta(before: Read[Any], after: Read[Any]) -> Read[float]:
    if before.value is None or after.value is None:
        return unknown(before.why or after.why or "unreadable")
    return known(float(after.value) - float(before.value))


def _outside(busy: Read[float], run: Read[float]) -> Read[float]:
    """Busy CPU time of the run's CPUs less the run's own (never below 0: the two counters
    tick differently, and the run may use CPUs it was not pinned to)."""
    if busy.value is None:
        return unknown(f"/proc/stat: {busy.why}")
    if run.value is None:
        return unknown(f"the run's own CPU time: {run.why}")
    return known(max(0.0, busy.value - run.value))


def _freq_range(first: Read[tuple[int, ...]], last: Read[tuple[int, ...]]) -> Read[list[int]]:
    seen = [*(first.value or ()), *(last.value or ())]
    if not seen:
        return unknown(first.why or last.why or "no frequency read")
    return known([min(seen), max(seen)])


def _gpu_throttle(first: Snapshot, last: Snapshot) -> Read[list[str]]:
    if first.gpus.value is None and last.gpus.value is None:
        return unknown(first.gpus.why or "NVML unavailable")
    states = [*(first.gpus.value or ()), *(last.gpus.value or ())]
    reasons = {f"{s.device.split(':')[0]}:{r}" for s in states for r in s.throttle}
    return known(sorted(reasons))
