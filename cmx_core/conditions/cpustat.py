"""``/proc/stat`` and ``/proc/loadavg``: how busy the CPUs were, and the steal time."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.conditions.files import read_text
from cmx_core.conditions.values import Read, known, unknown

STAT = "/proc/stat"
LOADAVG = "/proc/loadavg"
TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
"""Jiffies a second (``USER_HZ``): /proc/stat counts in these."""


@dataclass(frozen=True)
class CpuTimes:
    """Seconds the given CPUs spent busy (user, nice, system, irq, softirq) and stolen."""

    busy_s: float
    steal_s: float


def cpu_times(root: Path, cpus: Sequence[int]) -> Read[CpuTimes]:
    """The busy and steal seconds of ``cpus`` (the ``cpuN`` lines) since boot."""
    text = read_text(root, STAT)
    if text.value is None:
        return Read(why=text.why)
    wanted = {f"cpu{cpu}" for cpu in cpus}
    busy = steal = 0
    found = 0
    for line in text.value.splitlines():
        fields = line.split()
        if not fields or fields[0] not in wanted:
            continue
        ticks = [int(f) for f in fields[1:]] + [0] * 8
        user, nice, system, _idle, _iowait, irq, softirq, stolen = ticks[:8]
        busy += user + nice + system + irq + softirq
        steal += stolen
        found += 1
    if found != len(wanted):
        return unknown(f"{STAT}: {len(wanted) - found} of the run's CPUs have no line")
    return known(CpuTimes(busy / TICKS, steal / TICKS))


def load_average(root: Path) -> Read[tuple[float, float, float]]:
    """The 1, 5 and 15 minute load averages (what ``os.getloadavg`` reads)."""
    text = read_text(root, LOADAVG)
    if text.value is None:
        return Read(why=text.why)
    try:
        one, five, fifteen = (float(f) for f in text.value.split()[:3])
    except ValueError:
        return unknown(f"{LOADAVG}: not three numbers ({text.value[:40]!r})")
    return known((one, five, fifteen))


def online_cpus(root: Path) -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity) on a live machine; on a recorded
    tree, every ``cpuN`` line of its /proc/stat."""
    if root == Path("/") and hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    text = read_text(root, STAT).value or ""
    return tuple(int(line.split()[0][3:]) for line in text.splitlines() if line[:3] == "cpu" and line[3:4].isdigit())
