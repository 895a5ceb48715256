"""The injections of one attempt of one step, applied to each process it starts
(:func:`cmx_core.run.processes.run_process` asks :func:`current`); only the step's first
attempt is armed, so a recovery policy can show the recovery (docs/faults.md)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cmx_core.faults.registry import INJECTORS, Injectors
from cmx_core.providers.recovery import Injection

if TYPE_CHECKING:
    import subprocess


@dataclass
class Armed:
    """The injections of one attempt of one step, each applied by its injector (a
    :class:`cmx_core.faults.injector.Strike` to them). ``fired_at``: when the fault struck
    (wall clock), once it did."""

    injections: tuple[Injection, ...]
    progress_file: Path | None = None
    injectors: Injectors = INJECTORS
    fired_at: float | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    _cleanups: list[Callable[[], object]] = field(default_factory=list)

    def prefix(self, cwd: Path) -> list[str]:
        """What goes before the step's argv: a tmpfs over ``cwd``, a network namespace."""
        argv: list[str] = []
        for injection in self.injections:
            argv += self.injectors.get(injection.fault).prefix(injection, cwd, self)
        return argv

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        """Limit the process's memory, or arm the kill, as the injections say."""
        for injection in self.injections:
            self.injectors.get(injection.fault).started(injection, proc, self)

    def fire(self) -> None:
        if self.fired_at is None:
            self.fired_at = time.time()

    def progress(self) -> float:
        """The latest ``progress`` the step reported on its metrics channel (0 if none)."""
        if self.progress_file is None:
            return 0.0
        try:
            lines = self.progress_file.read_text(errors="replace").splitlines()
        except OSError:
            return 0.0
        for line in reversed(lines):
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "progress":
                with contextlib.suppress(ValueError):
                    return float(parts[1])
        return 0.0

    def on_cleanup(self, undo: Callable[[], object]) -> None:
        self._cleanups.append(undo)

    def finished(self) -> None:
        self.stopping.set()
        while self._cleanups:
            self._cleanups.pop()()


_CURRENT: ContextVar[Armed | None] = ContextVar("cmx_injection", default=None)


def current() -> Armed | None:
    """The injections armed for the step running in this thread (None: none)."""
    return _CURRENT.get()


@contextlib.contextmanager
def armed(injections: Sequence[Injection], progress_file: Path | None,
          injectors: Injectors = INJECTORS) -> Iterator[Armed | None]:
    """Arm ``injections`` for the processes the step started inside the block."""
    if not injections:
        yield None
        return
    state = Armed(tuple(injections), progress_file, injectors)
    token = _CURRENT.set(state)
    try:
        yield state
    finally:
        _CURRENT.reset(token)
        state.finished()


def strike(proc: subprocess.Popen[bytes]) -> None:
    """Let the injections armed for this step strike ``proc``, a process a Python step started
    itself (cmx-train's launch of its ranks), as they strike a shell step's: kill-step kills
    its process group at its moment. Nothing when none are armed."""
    state = current()
    if state is not None:
        state.started(proc)
