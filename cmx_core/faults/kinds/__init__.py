"""The fault kinds cmx injects, one file each (docs/faults.md). A new fault is a new file
here that defines its ``KIND`` and ``INJECTOR`` (an :class:`cmx_core.faults.injector.Injector`),
plus its line below; ``--inject``'s help and errors list them in this order."""

from __future__ import annotations

from cmx_core.faults.injector import Injector
from cmx_core.faults.kinds import disk_full, kill_step, kill_worker, oom, partition

BUILTIN: tuple[Injector, ...] = (
    kill_step.INJECTOR,
    oom.INJECTOR,
    disk_full.INJECTOR,
    partition.INJECTOR,
    kill_worker.INJECTOR,
)
