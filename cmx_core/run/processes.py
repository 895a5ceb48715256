"""The processes shell steps start: run one to completion with its own log files, and kill
every one still running when a run is interrupted (Ctrl-C, SIGTERM, a failed parallel
node)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from cmx_core.errors import ProcessEnd, StepFailed
from cmx_core.faults import armed
from cmx_core.run.watchdog import TOKEN_ENV
from cmx_core.sandbox.step_group import open_group

if TYPE_CHECKING:
    import subprocess


@dataclass(frozen=True)
class Exit:
    """How a step's process ended: its return code (``-N``: signal N ended it) and the OOM
    kills its own memory cgroup counted (``oom_group`` None: it had none here)."""

    returncode: int
    oom_kills: int = 0
    oom_group: Path | None = None

    def ended(self) -> ProcessEnd:
        """The evidence a failure's cause is typed by (:mod:`cmx_core.faults.causes`)."""
        signal_number = -self.returncode if self.returncode < 0 else None
        return ProcessEnd(signal=signal_number, oom_kills=self.oom_kills,
                          memory_group=str(self.oom_group) if self.oom_group is not None else None)


def run_process(argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None,
                 stdout_path: Path, stderr_path: Path) -> int:
    """Run ``argv`` to its end; its return code (:func:`run_step_process` says more)."""
    return run_step_process(argv, cwd, env, timeout, stdout_path, stderr_path).returncode


def run_step_process(argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None,
                     stdout_path: Path, stderr_path: Path | None = None) -> Exit:
    """Run ``argv`` in its own process group and memory cgroup (where one can be made:
    :mod:`cmx_core.sandbox.step_group`), its output to the two files (``stderr_path`` None:
    both streams to ``stdout_path``, in the order they were written). Ctrl-C, SIGTERM and
    SIGHUP of cmx kill the group, ``kill -9`` of cmx kills the process (:func:`dies_with_cmx`)
    and the watchdog its group; ``--inject`` faults armed for the attempt strike it. Raises
    :class:`StepFailed` when it cannot start or runs past ``timeout`` (then it is killed)."""
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    _guard()
    injected = armed.current()  # faults armed for this attempt (docs/faults.md)
    prefix = injected.prefix(cwd) if injected is not None else []
    group = open_group()
    join = group.join() if group is not None else []
    with open(stdout_path, "wb") as out, _stderr_file(stderr_path) as err:
        try:
            proc = subprocess.Popen([*dies_with_cmx(), *join, *prefix, *argv], cwd=cwd,
                                    env={**env, TOKEN_ENV: TOKEN}, stdout=out,
                                    stderr=subprocess.STDOUT if err is None else err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            if group is not None:
                group.close()
            raise StepFailed(f"cannot start `{argv[0]}`: {exc.strerror}") from None
        RUNNING.add(proc)
        _tell(f"+{proc.pid}")
        if group is not None:
            _tell(f"+{group.path}")  # a kill -9 of cmx: the watchdog empties the step's cgroup
            group.started(proc.pid)  # before the injections: the oom one limits this group
        limit = float(timeout) if timeout else None
        try:
            if injected is not None:
                injected.started(proc)
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise StepFailed(f"`{argv[0]}` timed out after {limit:g} s and was killed "
                             f"(log: {stderr_path or stdout_path})") from None
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            RUNNING.discard(proc)
            _tell(f"-{proc.pid}")
            counted = group.close() if group is not None else None  # kills what the step left running
            if group is not None:
                _tell(f"-{group.path}")
    if counted is None:
        return Exit(code)
    return Exit(code, counted.kills, counted.group)


def _stderr_file(path: Path | None) -> contextlib.AbstractContextManager[BinaryIO | None]:
    """The step's stderr file, or None (and nothing to close) when it shares stdout's."""
    return contextlib.nullcontext() if path is None else open(path, "wb")


TOKEN = os.urandom(8).hex()
"""This cmx process's mark on every process its steps start (``CMX_RUN_TOKEN``)."""

_WATCHDOG: list[subprocess.Popen[bytes]] = []
_PR_SET_CHILD_SUBREAPER = 36
_LOCK = threading.Lock()


def _guard() -> None:
    """Before the first step of this process: become a child subreaper and start the
    watchdog (:mod:`cmx_core.run.watchdog`). Where either is unavailable (not Linux), a
    step's group is still killed on Ctrl-C, SIGTERM and SIGHUP."""
    with _LOCK:
        if not _WATCHDOG and sys.platform.startswith("linux"):
            _start_watchdog()


def _start_watchdog() -> None:
    try:

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    source = Path(__file__).with_name("watchdog.py").read_text(encoding="utf-8")
    try:
        _WATCHDOG.append(subprocess.Popen([sys.executable, "-S", "-c", source, TOKEN], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, close_fds=True))
    except OSError:
        pass


def reap_adopted() -> list[int]:
    """At the end of the ``cmx`` command: SIGKILL what cmx adopted as a child subreaper (a
    step's descendant whose parent exited: a ``setsid env -i`` grandchild on a machine where
    no cgroup held the step) and what it started; the PIDs killed. Only once a shell step has
    made this process a subreaper, never the watchdog, and only from the command's own
    process (:func:`cmx_core.cli.main.run_command`), not from an in-process ``main()``."""
    if not _WATCHDOG:
        return []
    import psutil  # deferred: only at the end of a command whose steps ran

    spare = {watchdog.pid for watchdog in _WATCHDOG}
    try:
        adopted = [child for child in psutil.Process().children() if child.pid not in spare]
        victims = [*adopted, *(p for child in adopted for p in child.children(recursive=True))]
    except psutil.Error:
        return []
    killed = []
    for victim in victims:
        try:
            victim.kill()
            killed.append(victim.pid)
        except psutil.Error:
            pass
    return killed


def _tell(line: str) -> None:
    """Tell the watchdog a step group started (``+PGID``) or ended (``-PGID``)."""
    with _LOCK:
        if _WATCHDOG and _WATCHDOG[0].stdin is not None:
            try:
                _WATCHDOG[0].stdin.write(f"{line}\n".encode())
                _WATCHDOG[0].stdin.flush()
            except (OSError, ValueError):
                pass


_SETPRIV = "/usr/bin/setpriv"


def dies_with_cmx(signal_name: str = "KILL") -> list[str]:
    """A prefix that makes the step's process get SIGKILL (or ``signal_name``) when cmx dies,
    even by ``kill -9`` (Linux's parent-death signal, set by util-linux ``setpriv`` just
    before it execs the step: no wrapper process stays). Empty where ``setpriv`` is missing;
    Ctrl-C, SIGTERM and SIGHUP kill the step's whole process group in any case
    (:func:`kill_running`)."""
    return [_SETPRIV, "--pdeathsig", signal_name, "--"] if os.access(_SETPRIV, os.X_OK) else []


RUNNING: set[subprocess.Popen[bytes]] = set()
"""Processes started by shell steps; killed when a run is interrupted."""


def kill_running() -> None:
    """Kill every process group a shell step started (used on Ctrl-C)."""
    for proc in list(RUNNING):
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
