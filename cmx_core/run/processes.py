"""The processes shell steps start: run one to completion with its own log files, and kill
every one still running when a run is interrupted (Ctrl-C, SIGTERM, a failed parallel
node)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cmx_core.errors import StepFailed

if TYPE_CHECKING:
    import subprocess


def run_process(argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None,
                 stdout_path: Path, stderr_path: Path) -> int:
    import subprocess

    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen([*dies_with_cmx(), *argv], cwd=cwd, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise StepFailed(f"cannot start `{argv[0]}`: {exc.strerror}") from None
        RUNNING.add(proc)
        limit = float(timeout) if timeout else None
        try:
            return proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise StepFailed(f"`{argv[0]}` timed out after {limit:g} s and was killed (log: {stderr_path})") from None
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            RUNNING.discard(proc)


_SETPRIV = "/usr/bin/setpriv"


def dies_with_cmx() -> list[str]:
    """A prefix that makes the step's process get SIGKILL when cmx dies, even by ``kill -9``
    (Linux's parent-death signal, set by util-linux ``setpriv`` just before it execs the
    step: no wrapper process stays). Empty where ``setpriv`` is missing; Ctrl-C, SIGTERM
    and SIGHUP kill the step's whole process group in any case (:func:`kill_running`)."""
    return [_SETPRIV, "--pdeathsig", "KILL", "--"] if os.access(_SETPRIV, os.X_OK) else []


RUNNING: set[subprocess.Popen[bytes]] = set()
"""Processes started by shell steps; killed when a run is interrupted."""


def kill_running() -> None:
    """Kill every process group a shell step started (used on Ctrl-C)."""
    for proc in list(RUNNING):
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
