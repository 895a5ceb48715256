"""Fault injection on the local machine: ``--inject FAULT[@WHEN]`` (docs/faults.md).

Each fault uses a real Linux mechanism on the processes a step starts, and only on the
step's first attempt (so a recovery policy can show the recovery):

==============  ======================================================================
``kill-step``   SIGKILL the step's process group ``@2s`` after it started, or ``@50%``
                once the step reported ``progress`` >= 0.5 on its metrics channel
``oom``         a memory cgroup limit (``@64M``, default 64 MiB) below the step's need:
                the kernel's OOM killer ends it
``disk-full``   a size-limited tmpfs (``@64K``, default 64 KiB) mounted over the step's
                work directory (bubblewrap, a private mount namespace)
``partition``   the step runs in a new network namespace with no route (``unshare --net``)
==============  ======================================================================

``kill-worker`` (a cluster's worker killed) is injected by the cluster executor itself
(:meth:`cmx_core.run.remote.RemoteExecutor.kill_worker`); every other executor refuses it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.errors import UsageError
from cmx_core.providers.recovery import Injection

if TYPE_CHECKING:
    import subprocess

FAULTS = ("kill-step", "oom", "disk-full", "partition", "kill-worker")
LOCAL_FAULTS = ("kill-step", "oom", "disk-full", "partition")
DEFAULT_LIMIT = {"oom": 64 << 20, "disk-full": 64 << 10}
_SIZE = re.compile(r"^(\d+)([KMG]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_TIME = re.compile(r"^(\d+(?:\.\d+)?)s?$")
_PROGRESS = re.compile(r"^(\d+(?:\.\d+)?)%$")
POLL_S = 0.02


def parse_injection(text: str) -> Injection:
    """``FAULT[@WHEN]`` as an :class:`Injection`; a one-line UsageError naming what is wrong."""
    fault, _, when = text.strip().partition("@")
    if fault not in FAULTS:
        raise UsageError(f"--inject {text!r}: unknown fault {fault!r}; use one of {', '.join(FAULTS)}")
    if fault == "kill-step":
        return _kill_step(text, when)
    if fault in DEFAULT_LIMIT:
        return Injection(fault, limit_bytes=_size(text, when) if when else DEFAULT_LIMIT[fault], text=text)
    if when:
        raise UsageError(f"--inject {text!r}: {fault} takes no @WHEN")
    return Injection(fault, text=text)


def _kill_step(text: str, when: str) -> Injection:
    progress, seconds = _PROGRESS.match(when), _TIME.match(when or "0")
    if progress is not None and 0 < float(progress.group(1)) <= 100:
        return Injection("kill-step", at_progress=float(progress.group(1)) / 100, text=text)
    if seconds is not None:
        return Injection("kill-step", after_s=float(seconds.group(1)), text=text)
    raise UsageError(f"--inject {text!r}: use kill-step@SECONDS (kill-step@2s) or kill-step@PERCENT (kill-step@50%)")


def _size(text: str, when: str) -> int:
    match = _SIZE.match(when)
    if match is None or int(match.group(1)) <= 0:
        raise UsageError(f"--inject {text!r}: the limit is a size like 64K, 32M or 1G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def check_injections(injections: Sequence[Injection], executor: str,
                     own: frozenset[str] = frozenset()) -> None:
    """Refuse faults the executor cannot inject (before anything runs); ``own``: those the
    executor injects itself (``kill-worker`` on a cluster executor)."""
    for injection in injections:
        if injection.fault in own:
            continue
        if injection.fault == "kill-worker":
            raise UsageError(f"--inject {injection.text}: the {executor} executor has no worker to kill; "
                             "use a cluster executor that kills its worker (slurm, k8s; docs/faults.md)")
        if injection.fault not in LOCAL_FAULTS:
            raise UsageError(f"--inject {injection.text}: the {executor} executor cannot inject {injection.fault}")
        if injection.fault in ("disk-full", "partition") and shutil.which(_TOOL[injection.fault]) is None:
            raise UsageError(f"--inject {injection.text}: needs `{_TOOL[injection.fault]}` on PATH")


_TOOL = {"disk-full": "bwrap", "partition": "unshare"}


@dataclass
class Armed:
    """The injections of one attempt of one step: applied to each process it starts.
    ``fired_at``: when the fault struck (wall clock), once it did."""

    injections: tuple[Injection, ...]
    progress_file: Path | None = None
    fired_at: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _cleanups: list[Any] = field(default_factory=list)

    def prefix(self, cwd: Path) -> list[str]:
        """What goes before the step's argv: a tmpfs over ``cwd``, a network namespace."""
        argv: list[str] = []
        for injection in self.injections:
            if injection.fault == "disk-full":
                self._fire()
                argv += ["bwrap", "--dev-bind", "/", "/", "--size", str(injection.limit_bytes), "--tmpfs", str(cwd),
                         "--chdir", str(cwd), "--die-with-parent", "--"]
            elif injection.fault == "partition":
                self._fire()
                argv += ["unshare", "--net", "--"]
        return argv

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        """Limit the process's memory, or arm the kill, as the injections say."""
        for injection in self.injections:
            if injection.fault == "oom":
                self._limit_memory(proc, injection.limit_bytes or DEFAULT_LIMIT["oom"])
            elif injection.fault == "kill-step":
                thread = threading.Thread(target=self._kill_when, args=(proc, injection), daemon=True,
                                          name="cmx-inject")
                thread.start()
                self._cleanups.append(thread.join)

    def _limit_memory(self, proc: subprocess.Popen[bytes], limit: int) -> None:
        # deferred: the engine imports this module on every run; bubblewrap pulls filelock
        from cmx_core.sandbox.bubblewrap import make_groups

        groups = make_groups(("memory",))
        if not groups.set_memory(limit) or groups.add(proc.pid):
            groups.remove()
            raise UsageError("--inject oom: cannot make a memory cgroup here (needs root, or a delegated cgroup)")
        self._fire()
        self._cleanups.append(lambda: (groups.kill_all(), groups.remove()))

    def _kill_when(self, proc: subprocess.Popen[bytes], injection: Injection) -> None:
        began = time.monotonic()
        while not self._stop.is_set() and proc.poll() is None:
            if (injection.after_s is not None and time.monotonic() - began >= injection.after_s) or \
                    (injection.at_progress is not None and self._progress() >= injection.at_progress):
                self._fire()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return
            self._stop.wait(POLL_S)

    def _progress(self) -> float:
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

    def _fire(self) -> None:
        if self.fired_at is None:
            self.fired_at = time.time()

    def finished(self) -> None:
        self._stop.set()
        while self._cleanups:
            self._cleanups.pop()()


_CURRENT: ContextVar[Armed | None] = ContextVar("cmx_injection", default=None)


def current() -> Armed | None:
    """The injections armed for the step running in this thread (None: none)."""
    return _CURRENT.get()


@contextlib.contextmanager
def armed(injections: Sequence[Injection], progress_file: Path | None) -> Iterator[Armed | None]:
    """Arm ``injections`` for the processes the step started inside the block."""
    if not injections:
        yield None
        return
    state = Armed(tuple(injections), progress_file)
    token = _CURRENT.set(state)
    try:
        yield state
    finally:
        _CURRENT.reset(token)
        state.finished()
