"""CPU frequency scaling: the governor, boost/turbo and each CPU's current frequency."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cmx_core.conditions.files import read_int, read_text
from cmx_core.conditions.values import Read, known, unknown

CPU = "/sys/devices/system/cpu"
NO_TURBO = f"{CPU}/intel_pstate/no_turbo"
BOOST = f"{CPU}/cpufreq/boost"


def governor(root: Path, cpus: Sequence[int]) -> Read[str]:
    """The governors of ``cpus``, distinct ones joined by ``,`` (``performance``)."""
    found = [read_text(root, f"{CPU}/cpu{cpu}/cpufreq/scaling_governor") for cpu in cpus]
    names = sorted({r.value for r in found if r.value})
    if not names:
        return unknown(found[0].why or "no cpufreq governor") if found else unknown("no CPUs")
    return known(",".join(names))


def boost(root: Path) -> Read[bool]:
    """Whether boost/turbo is on (intel_pstate's ``no_turbo``, else cpufreq's ``boost``)."""
    no_turbo = read_int(root, NO_TURBO)
    if no_turbo.value is not None:
        return known(no_turbo.value == 0)
    generic = read_int(root, BOOST)
    if generic.value is not None:
        return known(generic.value == 1)
    return unknown(f"neither {NO_TURBO} nor {BOOST} (no cpufreq driver exposes boost here)")


def current_khz(root: Path, cpus: Sequence[int]) -> Read[tuple[int, ...]]:
    """Each CPU's current frequency in kHz (``scaling_cur_freq``)."""
    found = [read_int(root, f"{CPU}/cpu{cpu}/cpufreq/scaling_cur_freq") for cpu in cpus]
    if not found or any(r.value is None for r in found):
        return unknown(next((r.why for r in found if r.why), "no CPUs") or "unreadable")
    return known(tuple(int(r.value or 0) for r in found))


def limits_khz(root: Path, cpus: Sequence[int]) -> Read[tuple[int, int]]:
    """The lowest ``scaling_min_freq`` and highest ``scaling_max_freq`` of ``cpus``."""
    lows = [read_int(root, f"{CPU}/cpu{cpu}/cpufreq/scaling_min_freq") for cpu in cpus]
    highs = [read_int(root, f"{CPU}/cpu{cpu}/cpufreq/scaling_max_freq") for cpu in cpus]
    if not lows or any(r.value is None for r in lows + highs):
        return unknown(next((r.why for r in lows + highs if r.why), "no CPUs") or "unreadable")
    return known((min(int(r.value or 0) for r in lows), max(int(r.value or 0) for r in highs)))
