"""CPU seconds used by the run itself: this process and the children it has reaped (whose
own reaped children roll up into them), from ``os.times()``.

The window opens before the executor starts its first step and closes after the executor
has waited for its last, so every step process is reaped by then and counted; reading the
live process tree instead (psutil) scans every process of the machine, 15 ms a reading on a
busy one. A descendant that detached itself (re-parented to init) is not counted and shows
as outside load.
"""

from __future__ import annotations

import os

from cmx_core.conditions.values import Read, known


def run_cpu_s() -> Read[float]:
    """CPU seconds (user + system) of this process and its reaped children."""
    times = os.times()
    return known(times.user + times.system + times.children_user + times.children_system)
