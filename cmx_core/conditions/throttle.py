"""CPU thermal-throttle counters (``thermal_throttle/*_count`` in sysfs, x86 only)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cmx_core.conditions.files import read_int, under
from cmx_core.conditions.values import Read, known, unknown

CPU = "/sys/devices/system/cpu"


def throttle_count(root: Path, cpus: Sequence[int]) -> Read[int]:
    """The sum of every ``*_throttle_count`` of ``cpus`` (core and package events); compare
    two readings: a count that moved during the run means it was throttled."""
    total, seen = 0, False
    for cpu in cpus:
        folder = f"{CPU}/cpu{cpu}/thermal_throttle"
        if not under(root, folder).is_dir():
            continue
        for entry in sorted(under(root, folder).glob("*_throttle_count")):
            count = read_int(root, f"{folder}/{entry.name}")
            if count.value is not None:
                total, seen = total + count.value, True
    return known(total) if seen else unknown(f"{CPU}/cpu*/thermal_throttle: absent (no x86 thermal driver here)")
