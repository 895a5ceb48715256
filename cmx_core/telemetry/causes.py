"""Why a step died, from its logs and its exit: a typed cause with the lines that show it.

:func:`classify` looks at the step's failure message (which carries a shell step's exit
code), the tails of its log files and the kernel's OOM-kill counter (``oom_kill`` in
``/proc/vmstat``, read before and after the step): a step killed by ``SIGKILL`` while that
counter rose was killed by the OOM killer. Causes, first match wins:

=============  ==============================================================
``cuda_oom``   ``CUDA out of memory``, ``torch.OutOfMemoryError``, ``HIP out of memory``
``oom``        ``MemoryError``, ``std::bad_alloc``, ``Cannot allocate memory``, the OOM killer
``nccl``       ``NCCL error``, ``ncclInternalError``/``ncclSystemError``/..., ``ProcessGroupNCCL``
``xid``        ``NVRM: Xid`` (a GPU driver fault)
``disk_full``  ``No space left on device``, ``Disk quota exceeded``
``segfault``   ``Segmentation fault``, ``SIGSEGV``, exit by signal 11 (code -11 or 139)
``time_limit`` ``timed out after`` (the step's timeout), Slurm's ``DUE TO TIME LIMIT``
=============  ==============================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

VMSTAT = Path("/proc/vmstat")
TAIL_LINES = 200
EVIDENCE_LINES = 3

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((cause, re.compile(rx)) for cause, rx in (
    ("cuda_oom", r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|HIP out of memory"
                 r"|cudaErrorMemoryAllocation"),
    ("oom", r"\bMemoryError\b|std::bad_alloc|Cannot allocate memory|Out of memory|oom-kill|Killed process \d+"),
    ("nccl", r"NCCL error|nccl(Internal|System|Unhandled(Cuda)?|Invalid(Usage|Argument)|Remote)Error"
             r"|ProcessGroupNCCL.*(timeout|Timeout|error)|NCCL WARN"),
    ("xid", r"NVRM: Xid"),
    ("disk_full", r"No space left on device|Disk quota exceeded|ENOSPC"),
    ("segfault", r"Segmentation fault|SIGSEGV"),
    ("time_limit", r"timed out after|DUE TO TIME LIMIT"),
))
_EXIT = re.compile(r"exited with code (-?\d+)")
SIGKILL = 9
SIGSEGV = 11


@dataclass(frozen=True)
class Cause:
    cause: str
    evidence: tuple[str, ...]


def oom_kills(path: Path = VMSTAT) -> int | None:
    """The kernel's count of OOM kills since boot, ``None`` where it cannot be read."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def exit_signal(message: str) -> int | None:
    """The signal a shell step died of, from ``exited with code -9`` (or 128 + N)."""
    found = _EXIT.search(message)
    if found is None:
        return None
    code = int(found.group(1))
    if code < 0:
        return -code
    return code - 128 if 128 < code < 160 else None


def _tail(path: Path) -> list[str]:
    try:
        with open(path, errors="replace") as handle:
            return handle.read().splitlines()[-TAIL_LINES:]
    except OSError:
        return []


def _lines(message: str, logs: Iterable[Path]) -> list[str]:
    lines = [message]
    for log in logs:
        lines += [f"{log.name}: {line.strip()[:300]}" for line in _tail(log) if line.strip()]
    return lines


def classify(message: str, logs: Sequence[Path] = (), oom_before: int | None = None,
             oom_after: int | None = None) -> Cause | None:
    """The cause of a failure (see the module docstring), or ``None`` when nothing shows one."""
    lines = _lines(message, logs)
    for cause, pattern in _PATTERNS:
        hits = [line for line in lines if pattern.search(line)]
        if hits:
            return Cause(cause, tuple(hits[-EVIDENCE_LINES:]))
    signal = exit_signal(message)
    if signal == SIGKILL and oom_before is not None and oom_after is not None and oom_after > oom_before:
        return Cause("oom", (f"killed by SIGKILL while the kernel's OOM kills rose from {oom_before} to "
                             f"{oom_after} ({VMSTAT} oom_kill)",))
    if signal == SIGSEGV:
        return Cause("segfault", (f"killed by signal {SIGSEGV} (SIGSEGV): {message[:200]}",))
    return None
