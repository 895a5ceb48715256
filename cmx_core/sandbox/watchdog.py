"""Memory without cgroups: a watchdog on the run's process tree RSS, and its peak from rusage.

Where no memory cgroup can be had (not root, or a host whose memory controller is not
available to cmx), memory is not bounded with ``RLIMIT_AS``: that makes an allocation fail
inside the program (an error, not a memory verdict) and breaks runtimes that reserve address
space far beyond what they touch. Instead:

* :class:`MemoryWatchdog` sums the resident set of the sandbox's processes (the sandbox's
  PID 1 and everything under it, from ``/proc/<pid>/task/*/children`` and ``statm``) every
  tick of the parent's loop and stops the run once the sum passes the limit, as the kernel's
  OOM killer would with a cgroup: verdict ``memory_limit``.
* :func:`subreaper` makes this process the child subreaper while a run goes: bubblewrap's
  outer process exits without waiting for the sandbox's PID 1, which then becomes this
  process's child, so ``wait4`` gives its rusage, and with it the program's (a process's
  rusage includes the children it waited for, and PID 1 waits for all of them). That is the
  peak RSS (``ru_maxrss``) and CPU time of a run no tick could see, such as a short spike (only
  PID 1's: bwrap's own ``ru_maxrss`` carries this process's high-water mark, which the kernel
  copies through fork and exec, so it is never read); a
  peak over the limit after exit is a ``memory_limit`` verdict too, so a verdict means the
  same as with a cgroup.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
PR_SET_CHILD_SUBREAPER = 36
PROC = Path("/proc")

_lock = threading.Lock()
_holders = 0


def _prctl_subreaper(on: bool) -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return int(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0


@contextmanager
def subreaper() -> Iterator[bool]:
    """This process is a child subreaper inside the block (shared by concurrent runs: the
    flag is process-wide, cleared when the last run leaves); yields whether it could be set."""
    global _holders
    with _lock:
        ok = _holders > 0 or _prctl_subreaper(True)
        if ok:
            _holders += 1
    try:
        yield ok
    finally:
        if ok:
            with _lock:
                _holders -= 1
                if _holders == 0:
                    _prctl_subreaper(False)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def _rss(pid: int) -> int:
    try:
        return int((PROC / str(pid) / "statm").read_text().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def tree_rss(pid: int) -> int:
    """The summed resident set of ``pid`` and all its descendants, in bytes (0 once gone)."""
    total, stack, seen = 0, [pid], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        total += _rss(current)
        stack += _children(current)
    return total


class MemoryWatchdog:
    """A ``pump`` check: ``"memory"`` once the tree under ``pid`` holds more than ``limit``
    bytes resident; ``peak`` is the largest sum it saw."""

    def __init__(self, pid: int, limit: int | None) -> None:
        self.pid = pid
        self.limit = limit
        self.peak = 0

    def __call__(self) -> str | None:
        used = tree_rss(self.pid)
        self.peak = max(self.peak, used)
        return "memory" if self.limit is not None and used > self.limit else None


@dataclass(frozen=True)
class Usage:
    """What ``wait4`` said of a reaped process: its (and its waited-for descendants') peak RSS
    and CPU seconds."""

    peak_rss_bytes: int
    cpu_s: float

    @classmethod
    def of(cls, usage: resource.struct_rusage) -> Usage:
        return cls(usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)

    def merge(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        return Usage(max(self.peak_rss_bytes, other.peak_rss_bytes), self.cpu_s + other.cpu_s)

