"""One confined program run of the judge (a compile, a case or a tester call) and its two
backends' shared vocabulary: the :class:`Call` asked for and the :class:`Ran` it gives."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cmx_core.api import Limits


class Ending(str, enum.Enum):
    """How a run ended, in the judge's terms (both backends map onto these)."""

    EXITED = "exited"
    TIME = "time"
    MEMORY = "memory"
    OUTPUT = "output"
    PROCESS = "process"  # the process limit refused a fork (even one the program caught)
    SIGNALED = "signaled"
    FAILED = "failed"  # the backend could not run the program at all


@dataclass(frozen=True)
class CallLimits:
    """Bounds of one run: wall seconds, CPU seconds, memory bytes, captured/written output bytes,
    processes, and the total size of its work dir (``work_bytes``: None, no total bound)."""

    wall_s: float
    cpu_s: float
    memory_bytes: int
    output_bytes: int
    processes: int = 64
    work_bytes: int | None = Limits.work_bytes  # the sandbox's own default


@dataclass(frozen=True)
class Call:
    """What to run: ``argv`` inside the judge's root, ``work_dir`` (host) mounted writable at
    ``/work`` (the cwd), ``binds`` host paths mounted read-only, ``stdin`` bytes."""

    argv: tuple[str, ...]
    work_dir: Path
    limits: CallLimits
    binds: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes = b""


@dataclass(frozen=True)
class Ran:
    """What a run did. ``cpu_s`` and ``memory_bytes`` are None where the backend could not measure."""

    ending: Ending
    exit_code: int | None
    wall_s: float
    cpu_s: float | None
    memory_bytes: int | None
    stdout: bytes
    stderr: bytes
    reason: str

    @property
    def execution_time_s(self) -> float:
        """max(CPU time, wall time), as ALE-Bench measures a case."""
        return max(self.wall_s, self.cpu_s or 0.0)


class Runner(Protocol):
    """A backend that runs calls: ``name`` is ``sandbox`` or ``docker``."""

    name: str

    def run(self, call: Call) -> Ran: ...


def lane(runner: Runner, root: Path, binds: Mapping[str, str]) -> AbstractContextManager[Runner]:
    """A runner for a series of calls whose work dirs lie under ``root`` and whose binds are
    among ``binds`` (one worker's cases): the runner's own ``lane`` where it has one (the
    sandbox judge keeps one sandbox up for the series), else the runner itself."""
    opener = getattr(runner, "lane", None)
    if opener is None:
        return nullcontext(runner)
    opened: AbstractContextManager[Runner] = opener(root, binds)
    return opened
