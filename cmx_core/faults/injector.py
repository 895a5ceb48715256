"""The :class:`Injector` protocol: what each kind of fault knows about itself (docs/faults.md).

One object per fault kind (:mod:`cmx_core.faults.kinds`) parses its ``@WHEN``, checks that
the run's executor can inject it (before anything runs), and arms it on each process a step
starts: a prefix to the argv (a mount or network namespace), an action once the process runs
(a memory limit, a timed kill) and what to undo after the attempt. A fault the cluster
executor injects itself (``kill-worker``) has ``by_executor`` set and arms nothing here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cmx_core.errors import UsageError
from cmx_core.providers.recovery import FaultKind, Injection

if TYPE_CHECKING:
    import subprocess


class Strike(Protocol):
    """What an armed injector may do to the attempt it struck (:class:`cmx_core.faults.armed.Armed`)."""

    @property
    def stopping(self) -> threading.Event:
        """Set once the attempt is over: a waiting injector stops."""

    def fire(self) -> None:
        """Record that the fault struck now (the first call counts)."""

    def progress(self) -> float:
        """The latest ``progress`` the step reported on its metrics channel (0 if none)."""

    def on_cleanup(self, undo: Callable[[], object]) -> None:
        """Run ``undo`` once the attempt is over (the last added runs first)."""


class Injector(Protocol):
    """One kind of fault. ``by_executor``: the executor injects it itself (an executor lists
    it in ``Executor.injects``); the steps' engine arms every other kind."""

    @property
    def kind(self) -> FaultKind: ...

    @property
    def by_executor(self) -> bool: ...

    def parse(self, text: str, when: str) -> Injection:
        """``FAULT@WHEN`` (``text``, whole) as an Injection; a one-line UsageError if bad."""

    def check(self, injection: Injection, executor: str) -> None:
        """Refuse, with a one-line UsageError, what the ``executor`` (or this machine) cannot inject."""

    def prefix(self, injection: Injection, cwd: Path, strike: Strike) -> list[str]:
        """What goes before the argv of a process the step starts in ``cwd``."""

    def started(self, injection: Injection, proc: subprocess.Popen[bytes], strike: Strike) -> None:
        """Act on a process the step started."""


class StepInjector:
    """A base for injectors: no ``@WHEN``, injectable by every executor's steps, nothing to
    arm; a kind overrides what it needs."""

    kind: FaultKind
    by_executor: bool = False

    def parse(self, text: str, when: str) -> Injection:
        if when:
            raise UsageError(f"--inject {text!r}: {self.kind} takes no @WHEN")
        return Injection(self.kind, text=text)

    def check(self, injection: Injection, executor: str) -> None:
        if self.by_executor:
            raise UsageError(f"--inject {injection.text}: the {executor} executor cannot inject {injection.fault}")

    def prefix(self, injection: Injection, cwd: Path, strike: Strike) -> list[str]:
        return []

    def started(self, injection: Injection, proc: subprocess.Popen[bytes], strike: Strike) -> None:
        return None
