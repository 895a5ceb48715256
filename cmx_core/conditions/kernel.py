"""Kernel and cgroup settings that move benchmark numbers: NUMA balancing, ASLR, isolated
CPUs and the cgroup's CPU quota."""

from __future__ import annotations

from pathlib import Path

from cmx_core.conditions.files import cpu_list, read_int, read_text
from cmx_core.conditions.values import Read, known, unknown

NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
ASLR = "/proc/sys/kernel/randomize_va_space"
ISOLATED = "/sys/devices/system/cpu/isolated"
CGROUP_OF_SELF = "/proc/self/cgroup"


def numa_balancing(root: Path) -> Read[int]:
    """0 off, 1 on (2: memory tiering); unknown on a kernel without NUMA balancing."""
    return read_int(root, NUMA_BALANCING)


def randomize_va_space(root: Path) -> Read[int]:
    """ASLR: 0 off, 1 partial, 2 full."""
    return read_int(root, ASLR)


def isolated_cpus(root: Path) -> Read[tuple[int, ...]]:
    text = read_text(root, ISOLATED)
    if text.value is None:
        return Read(why=text.why)
    try:
        return known(cpu_list(text.value))
    except ValueError:
        return unknown(f"{ISOLATED}: not a CPU list ({text.value[:40]!r})")


def cgroup_dir(root: Path) -> Read[str]:
    """The cgroup v2 directory of this process, as an absolute path on the machine."""
    text = read_text(root, CGROUP_OF_SELF)
    if text.value is None:
        return Read(why=text.why)
    for line in text.value.splitlines():
        if line.startswith("0::"):
            return known("/sys/fs/cgroup" + line[3:].rstrip("/"))
    return unknown(f"{CGROUP_OF_SELF}: no cgroup v2 entry (a cgroup v1 machine)")


def cpu_quota(root: Path) -> Read[float]:
    """The cgroup's CPU quota in CPUs (``cpu.max``); 0.0 stands for no quota (``max``)."""
    where = cgroup_dir(root)
    if where.value is None:
        return Read(why=where.why)
    path = f"{where.value}/cpu.max"
    text = read_text(root, path)
    if text.value is None:
        return Read(why=text.why)
    quota, _, period = text.value.partition(" ")
    if quota == "max":
        return known(0.0)
    try:
        return known(round(int(quota) / int(period or "100000"), 3))
    except ValueError:
        return unknown(f"{path}: not 'QUOTA PERIOD' ({text.value[:40]!r})")
