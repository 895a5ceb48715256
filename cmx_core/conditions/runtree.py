"""CPU seconds used by the run itself: this process, its live descendants, and the children
it has reaped (whose own reaped children roll up into them), through ``psutil``.

The difference of two readings is the run's CPU time in the window; a descendant that
detached itself (re-parented to init) is not counted and shows as outside load.
"""

from __future__ import annotations

import os

import psutil

from cmx_core.conditions.values import Read, known, unknown


def run_cpu_s(pid: int | None = None) -> Read[float]:
    """CPU seconds (user + system) of process ``pid`` (default: this one) and its tree."""
    try:
        root = psutil.Process(pid or os.getpid())
        times = root.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in root.children(recursive=True):
            total += _live_cpu_s(child)
    except psutil.Error as err:
        return unknown(f"psutil: {type(err).__name__} reading the run's process tree")
    return known(total)


def _live_cpu_s(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:  # gone or a zombie since the listing: its time is in its parent's
        return 0.0
    return float(times.user + times.system)
