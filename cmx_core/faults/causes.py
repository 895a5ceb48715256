"""Why a step died, from its own evidence: a typed cause with the lines that show it.

:func:`classify` looks at how the step's process ended (:class:`cmx_core.errors.ProcessEnd`:
the signal, the OOM kills its own memory cgroup counted, the training rank that was lost),
its failure message (which carries a shell step's exit code) and the tails of its log files.
Nothing machine-wide is read: an OOM kill of another process elsewhere (``oom_kill`` in
``/proc/vmstat`` counts those too) says nothing about this step. Causes, first match wins:

==============  ===============================================================================
``oom``         the kernel OOM-killed a process in the step's own memory cgroup
``cuda_oom``    ``CUDA out of memory``, ``torch.OutOfMemoryError``, ``HIP out of memory``
``oom``         ``MemoryError``, ``std::bad_alloc``, ``Cannot allocate memory``, ``Out of memory``
``nccl``        ``NCCL error``, ``ncclInternalError``/``ncclSystemError``/..., ``ProcessGroupNCCL``
``xid``         ``NVRM: Xid`` (a GPU driver fault)
``disk_full``   ``No space left on device``, ``Disk quota exceeded``
``segfault``    ``Segmentation fault``, ``SIGSEGV``, death by signal 11 (code -11 or 139)
``time_limit``  ``timed out after`` (the step's timeout), Slurm's ``DUE TO TIME LIMIT``
``killed``      death by ``SIGKILL`` that no cause above explains (a kill from outside)
``terminated``  death by ``SIGTERM`` (a kill from outside, a scheduler's cancel)
==============  ===============================================================================

A cause by signal records the signal's name; a lost training rank is named by its rank, with
its own error, not another rank's.
"""

from __future__ import annotations

import re
import signal as signals
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import ProcessEnd

TAIL_LINES = 200
EVIDENCE_LINES = 3

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((cause, re.compile(rx)) for cause, rx in (
    ("cuda_oom", r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|HIP out of memory"
                 r"|cudaErrorMemoryAllocation"),
    ("oom", r"\bMemoryError\b|std::bad_alloc|Cannot allocate memory|Out of memory"),
    ("nccl", r"NCCL error|nccl(Internal|System|Unhandled(Cuda)?|Invalid(Usage|Argument)|Remote)Error"
             r"|ProcessGroupNCCL.*(timeout|Timeout|error)|NCCL WARN"),
    ("xid", r"NVRM: Xid"),
    ("disk_full", r"No space left on device|Disk quota exceeded|ENOSPC"),
    ("segfault", r"Segmentation fault|SIGSEGV"),
    ("time_limit", r"timed out after|DUE TO TIME LIMIT"),
))
_EXIT = re.compile(r"exited with code (-?\d+)")
_BY_SIGNAL: dict[int, str] = {int(signals.SIGSEGV): "segfault", int(signals.SIGKILL): "killed",
                              int(signals.SIGTERM): "terminated"}


@dataclass(frozen=True)
class Cause:
    """A typed cause: its name, the lines that show it, the signal that ended the step's
    process (``SIGKILL``; None: none did) and the training rank that was lost (None: none)."""

    cause: str
    evidence: tuple[str, ...]
    signal: str | None = None
    rank: int | None = None


def exit_signal(message: str) -> int | None:
    """The signal a shell step died of, from ``exited with code -9`` (or 128 + N)."""
    found = _EXIT.search(message)
    if found is None:
        return None
    code = int(found.group(1))
    if code < 0:
        return -code
    return code - 128 if 128 < code < 160 else None


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 64`` for a number Python has no name for."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(message: str, logs: Sequence[Path] = (), ended: ProcessEnd | None = None) -> Cause | None:
    """The cause of a failure (see the module docstring), or ``None`` when nothing shows one."""
    number = ended.signal if ended is not None and ended.signal is not None else exit_signal(message)
    name = signal_name(number) if number is not None else None
    rank = ended.rank if ended is not None else None
    if ended is not None and ended.oom_kills > 0:
        return Cause("oom", (f"the kernel OOM-killed {ended.oom_kills} process(es) in the step's own memory cgroup "
                             f"{ended.memory_group}",), name, rank)
    lines = _lines(message, logs)
    for cause, pattern in _PATTERNS:
        hits = [line for line in lines if pattern.search(line)]
        if hits:
            return Cause(cause, tuple(hits[-EVIDENCE_LINES:]), name, rank)
    if number in _BY_SIGNAL and name is not None:
        return Cause(_BY_SIGNAL[number], (_by_signal(number, name, message, ended),), name, rank)
    return None


def _by_signal(number: int, name: str, message: str, ended: ProcessEnd | None) -> str:
    if ended is not None and ended.rank is not None:
        own = f": {ended.error[:300]}" if ended.error else ""
        return f"rank {ended.rank} was ended by signal {number} ({name}){own}"
    return f"killed by signal {number} ({name}): {message[:200]}"


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
