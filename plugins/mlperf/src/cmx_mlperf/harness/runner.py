"""Parent side: run the child process for one LoadGen test and wait for it.

The child runs in a fresh, empty directory this module creates (its cwd, so no stray
``audit.config`` can change the test: workloads.md §1.3 item 3), in its own session, with
stdout/stderr in ``child.log``. Ctrl-C (or any exception while waiting) kills the child's
process group and raises :class:`cmx_core.errors.Interrupted`; nothing is returned, so no
half result is indexed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import Interrupted, StepFailed, UsageError
from cmx_mlperf.harness.child import ERROR, EXIT_USER_ERROR, REPORT
from cmx_mlperf.harness.live import ENV_FILE
from cmx_mlperf.harness.spec import LoadgenSpec

SPEC = "spec.json"
CHILD_LOG = "child.log"
KILL_GRACE_S = 5.0
POLL_S = 0.1


@dataclass(frozen=True)
class ChildRun:
    log_dir: Path
    report: dict[str, Any]


def fresh_log_dir(parent: Path, name: str = "loadgen") -> Path:
    """A new empty directory under ``parent`` (``loadgen``, ``loadgen-2``, ...)."""
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = parent / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise StepFailed(f"{parent}: cannot create a fresh LoadGen log directory")


def _env(metrics_file: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if metrics_file is not None:  # the test's live progress (cmx_mlperf.harness.live)
        env[ENV_FILE] = str(metrics_file)
    return env


def run_child(spec: LoadgenSpec, log_dir: Path, timeout_s: float | None = None,
              metrics_file: Path | None = None) -> ChildRun:
    """Run one LoadGen test in a child process; return its log dir and report. With
    ``metrics_file`` (the step's application channel) the child reports its progress there."""
    spec_path = log_dir / SPEC
    spec_path.write_text(spec.to_json())
    with open(log_dir / CHILD_LOG, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cmx_mlperf.harness.child", str(spec_path)],
            cwd=log_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=_env(metrics_file), start_new_session=True,
        )
        try:
            code = _wait(proc, timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise StepFailed(
                f"mlperf.loadgen: the LoadGen test ran past {timeout_s:.0f} s and was killed; "
                f"raise timeout_s or shorten duration_s (log: {log_dir / CHILD_LOG})"
            ) from None
        except BaseException:  # noqa: BLE001 - any interrupt (Ctrl-C, SystemExit) must stop the child first
            _kill(proc)
            (log_dir / "INTERRUPTED").write_text("the LoadGen child was killed; this run is incomplete\n")
            raise Interrupted(
                "mlperf.loadgen: interrupted; the LoadGen child was stopped and no result was kept"
            ) from None
    return ChildRun(log_dir, _outcome(code, log_dir))


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None) -> int:
    """Wait in short slices so that an interrupt is handled within ~0.1 s."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            return proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group, then SIGKILL after a grace period."""
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _outcome(code: int, log_dir: Path) -> dict[str, Any]:
    if code == EXIT_USER_ERROR and (log_dir / ERROR).exists():
        kind, _, message = (log_dir / ERROR).read_text().strip().partition("\t")
        raise (UsageError if kind == "UsageError" else StepFailed)(message)
    if code != 0:
        tail = _tail(log_dir / CHILD_LOG)
        raise StepFailed(
            f"mlperf.loadgen: the LoadGen child exited with status {code}: {tail} "
            f"(full log: {log_dir / CHILD_LOG})"
        )
    report: dict[str, Any] = json.loads((log_dir / REPORT).read_text())  # the child writes a JSON object
    return report


def _tail(path: Path) -> str:
    """The last non-empty line of the child's log (usually the exception)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"
