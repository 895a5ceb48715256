"""Threads per rank, chosen once for a whole scaling sweep.

A point that picks its own thread count (the cores divided by *its* ranks) gives the
1-process point every core and each rank of a wider point a share: the efficiency then
compares thread counts, not ranks (issue 43 saw 9.51). So every point of a sweep takes the
same count: ``threads_per_rank`` when given, else ``CMX_TRAIN_THREADS`` when set, else the
cores this process may use divided by the largest ranks per node among the sweep's points
(read from the sweep's ``sweep.json``, written before any point runs), at least 1. Outside
a sweep the largest is the run's own ``nproc``. The launcher hands the count to every rank
as ``OMP_NUM_THREADS`` and ``torch.set_num_threads``; the worker reads back what torch uses.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_train.config import TrainConfig

POINT = re.compile(r"^point-(\d+)(-r\d+)?$")
"""A sweep point's run directory: ``point-N``, or ``point-N-rK`` for a resumed attempt."""
SPEC_FILE = "sweep.json"
ENV = "CMX_TRAIN_THREADS"


@dataclass(frozen=True)
class ThreadChoice:
    """The threads of each rank and why that many."""

    per_rank: int
    chosen_by: str


def cores() -> int:
    """The CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def sweep_of(run_dir: Path) -> Path | None:
    """The sweep folder ``run_dir`` is a point of, or None outside a sweep."""
    if POINT.match(run_dir.name) and run_dir.parent.name.startswith("sw-"):
        return run_dir.parent
    return None


def largest_nproc(sweep: Path, own: int) -> int:
    """The most ranks per node among the sweep's points (``own`` where the spec cannot say)."""
    try:
        spec: Mapping[str, Any] = json.loads((sweep / SPEC_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return own
    base = dict(spec.get("base_inputs") or {})
    found = [own]
    for point in spec.get("matrix") or [{}]:
        value = {**base, **dict(point)}.get("nproc")
        try:
            found.append(int(str(value)))
        except (TypeError, ValueError):
            continue
    return max(1, *found)


def choose(config: TrainConfig, run_dir: Path, env: Mapping[str, str]) -> ThreadChoice:
    """The threads per rank of this run, the same for every point of its sweep."""
    if config.threads_per_rank > 0:
        return ThreadChoice(config.threads_per_rank, "input threads_per_rank")
    given = env.get(ENV, "").strip()
    if given:
        if not given.isdigit():
            raise UsageError(f"train: {ENV} must be a whole number of threads, got {given!r}")
        return ThreadChoice(max(1, int(given)), f"{ENV}={given}")
    have = cores()
    sweep = sweep_of(run_dir)
    if sweep is None:
        return ThreadChoice(max(1, have // config.nproc), f"{have} cores / {config.nproc} ranks per node")
    most = largest_nproc(sweep, config.nproc)
    return ThreadChoice(max(1, have // most),
                        f"{have} cores / {most} ranks per node, the most of sweep {sweep.name}")
