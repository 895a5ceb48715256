"""Which CPUs a sandboxed run gets: ``Limits.cpus`` of them, from the CPUs this process may
use (``os.sched_getaffinity``, so a cmx already pinned by its caller stays inside its set),
handed out round-robin by a counter in the cache shared by every cmx process on the
machine, so concurrent sandboxes spread over the allowed CPUs instead of all taking the
first ones."""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock

from cmx_core.paths import cache_dir

COUNTER = "sandbox-cpus.counter"
LOCK_TIMEOUT_S = 10.0


def _next(path: Path, count: int) -> int:
    """The counter's value before adding ``count`` (0 for a missing or unreadable file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S):
        try:
            start = int(path.read_text().strip() or 0)
        except (OSError, ValueError):
            start = 0
        path.write_text(str(start + count))
    return start


def pick_cpus(count: int, state_dir: Path | None = None) -> list[int]:
    """``count`` CPUs from the allowed set (all of them when it has no more), the next ones in turn."""
    allowed = sorted(os.sched_getaffinity(0))
    if count >= len(allowed):
        return allowed
    if state_dir is None:
        state_dir = cache_dir()
    start = _next(state_dir / COUNTER, count)
    return sorted(allowed[(start + i) % len(allowed)] for i in range(count))
