"""The far side of a ray run: the body of the Ray task, run on whichever node Ray picks.

It runs the cmx far command (``cmx run --lock lock.json ... --output remote``) as a child
process in a private directory on the node, so the node's own facts are detected there,
and returns the far run directory's files (result.json, nodes.json, facts.json, logs,
artifacts) as bytes. That path works whether or not the node shares this machine's file
system, so it is the only one. The size is bounded (``max_bytes``): a bigger run directory
is reported, not sent. This module imports nothing from Ray: it is a plain function that
tests call directly too.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LOCK_NAME = "lock.json"
OUTPUT_NAME = "remote"
LOG_TAIL_BYTES = 1 << 20
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class FarResult:
    """What the task sends back (pickled by Ray)."""

    exit_code: int
    files: Mapping[str, bytes] = field(default_factory=dict)
    log: bytes = b""
    node: Mapping[str, str] = field(default_factory=dict)
    error: str = ""


def run_far(command: Sequence[str], env: Mapping[str, str], lock: bytes, max_bytes: int) -> FarResult:
    """Run ``command`` (whose lock and output paths are relative: ``lock.json``,
    ``remote``) in a fresh directory and return the output directory's files."""
    work = Path(tempfile.mkdtemp(prefix="cmx-ray-far-"))
    try:
        (work / LOCK_NAME).write_bytes(lock)
        child_env = {**os.environ, "CMX_DATA_DIR": str(work / "data"), **env, "PYTHONUNBUFFERED": "1"}
        log_path = work / "far.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(list(command), cwd=work, env=child_env, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_die_with_parent)
        code = _wait(process)
        files, error = collect(work / OUTPUT_NAME, max_bytes)
        return FarResult(code, files, _tail(log_path), node_identity(), error)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _wait(process: subprocess.Popen[bytes]) -> int:
    """Poll rather than block, so Ray's cancellation (an exception raised in this thread)
    lands between polls; then the child's whole process group is killed with it."""
    try:
        while True:
            code = process.poll()
            if code is not None:
                return code
            time.sleep(0.05)
    except BaseException:
        _kill_group(process)
        raise


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the child, its process group and every descendant (cmx starts some steps in
    sessions of their own, outside the group)."""
    for pid in [*_descendants(process.pid), process.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _descendants(root: int) -> list[int]:
    """PIDs below ``root`` in the process tree (from /proc; empty where there is none)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _die_with_parent() -> None:
    """If the worker itself is killed (``ray.cancel(force=True)``), the child gets SIGKILL."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: cancellation still kills the group through _wait


def collect(directory: Path, max_bytes: int) -> tuple[dict[str, bytes], str]:
    """Every regular file under ``directory`` by relative path, or an error when they
    add up to more than ``max_bytes`` (then nothing is read)."""
    if not directory.is_dir():
        return {}, ""
    paths = sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
    total = sum(p.stat().st_size for p in paths)
    if total > max_bytes:
        return {}, (f"the far run directory holds {total / 1e6:.1f} MB in {len(paths)} files, more than "
                    f"max_result_mb={max_bytes / 1e6:g}; raise max_result_mb or write large outputs to shared storage")
    return {str(p.relative_to(directory)): p.read_bytes() for p in paths}, ""


def _tail(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
        return handle.read()


def node_identity() -> dict[str, str]:
    """Where the task ran (kept in the run's ray-job.json log)."""
    identity = {"hostname": socket.gethostname(), "pid": str(os.getpid())}
    try:
        import ray  # deferred: optional ray, only when this runs
        from ray._private.worker import WORKER_MODE, global_worker  # deferred: optional ray, only when this runs

        if not ray.is_initialized() or global_worker.mode != WORKER_MODE:
            return identity  # called outside a task (tests, benchmarks): no task to report
        context = ray.get_runtime_context()
        identity.update(node_id=context.get_node_id(), task_id=str(context.get_task_id() or ""))
    except Exception:  # noqa: BLE001 - called outside Ray (tests): no context to report
        pass
    return identity


def write_files(files: Mapping[str, bytes], directory: Path) -> None:
    """Write the returned files under ``directory``, refusing paths that leave it."""
    root = directory.resolve()
    for name, data in files.items():
        target = (root / name).resolve()
        if root not in target.parents:
            raise ValueError(f"far file {name!r} is outside the run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
