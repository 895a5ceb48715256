"""The far side of a ray run: the body of the Ray task, run on whichever node Ray picks.

It runs the cmx far command (``cmx run --lock lock.json ... --output remote``) as a child
process in a private directory on the node, so the node's own facts are detected there,
and returns the far run directory's files (result.json, nodes.json, facts.json, logs,
artifacts) as bytes. That path works whether or not the node shares this machine's file
system, so it is the only one. The size is bounded (``max_bytes``): a bigger run directory
is reported, not sent. This module imports nothing from Ray: it is a plain function that
tests call directly too.

Each run of the task stamps its start (:mod:`cmx_ray.runs`). With ``storage`` (a directory
every node reaches, ``--executor-opt storage=``), the far run's directory is
``<storage>/attempt-<N>`` (N: the run's number, :mod:`cmx_ray.runs`) instead of a private temporary one,
and a run started again after losing one resumes from the lost run's checkpoints: a copy of
the latest earlier run's that holds some, taken when the run starts (``CMX_RESUME_FROM``
names it), and ``CMX_ATTEMPT_BASE`` counts the runs before it (docs/faults.md, "Checkpoints across attempts").
"""

from __future__ import annotations

import contextlib
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

from cmx_ray import runs

LOCK_NAME = "lock.json"
OUTPUT_NAME = "remote"
LOG_TAIL_BYTES = 1 << 20
_PR_SET_PDEATHSIG = 1
TOKEN_ENV = "CMX_RAY_TASK"
"""Set in the far process's environment: the submission it belongs to (how kill-worker finds
it, and the key of its runs' start stamps)."""
RESUME_ENV = "CMX_RESUME_FROM"
BASE_ENV = "CMX_ATTEMPT_BASE"
ATTEMPT_DIR = "attempt-"
RESUME_DIR = "resume"
"""In a run's directory: the copy of the earlier run's checkpoints it resumes from."""
FENCED = "fenced"
"""Written into a fenced run's directory (with ``storage``): why it handed nothing back."""


@dataclass(frozen=True)
class FarResult:
    """What the task sends back (pickled by Ray)."""

    exit_code: int
    files: Mapping[str, bytes] = field(default_factory=dict)
    log: bytes = b""
    node: Mapping[str, str] = field(default_factory=dict)
    error: str = ""
    started: float = 0.0
    """When this run of the task started (the far function's first act)."""
    attempt: int = 0
    """Ray's number for this run of the task (0: its first)."""
    fenced: bool = False
    """A later run had started when this one ended: it hands back nothing (cmx_ray.runs)."""


@dataclass(frozen=True)
class Submission:
    """Which submission of the task a run belongs to (cmx submits it again when it gave a run
    up as cut off, :mod:`cmx_ray.runs`; 0: the first) and how many runs came before it."""

    number: int = 0
    earlier: int = 0


def run_far(command: Sequence[str], env: Mapping[str, str], lock: bytes, max_bytes: int,
            storage: str = "", submission: Submission = Submission()) -> FarResult:
    """Run ``command`` (whose lock and output paths are relative: ``lock.json``,
    ``remote``) in a fresh directory and return the output directory's files."""
    started, ray_number = time.time(), runs.attempt_number()
    attempt = submission.number * runs.PER_SUBMISSION + ray_number
    token = env.get(TOKEN_ENV, "")
    runs.stamp(token, attempt, started, runs.node_id())
    later = runs.superseded(token, attempt, _runs_in(storage))
    if later is not None:  # Ray ran again a submission cmx had given up: it must not run at all
        return FarResult(0, {}, b"", node_identity(), f"run number {attempt} of the task started after run number "
                         f"{later} of a later submission: fenced, nothing run", started, attempt, fenced=True)
    work, resume = _work_dir(storage, attempt, submission.earlier + ray_number)
    fenced = False
    try:
        (work / LOCK_NAME).write_bytes(lock)
        child_env = {**os.environ, "CMX_DATA_DIR": str(work / "data"), **env, **resume, "PYTHONUNBUFFERED": "1"}
        log_path = work / "far.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(list(command), cwd=work, env=child_env, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_die_with_parent)
        code = _wait(process)
        later = runs.superseded(token, attempt, _runs_in(storage))
        if later is not None:  # given up while it ran on: its result is not handed back
            fenced = True
            return _fenced(work, token, code, (attempt, later), started)
        files, error = collect(work / OUTPUT_NAME, max_bytes)
        return FarResult(code, files, _tail(log_path), node_identity(), error, started, attempt)
    finally:
        if not (fenced and storage):  # a fenced run's directory stays with the lost runs'
            shutil.rmtree(work, ignore_errors=True)


def _runs_in(storage: str) -> list[int]:
    """The run numbers that have a directory in the task's shared storage (none without one)."""
    return [number for number, _ in lost_runs(Path(storage))] if storage else []


def _fenced(work: Path, token: str, code: int, numbers: tuple[int, int], started: float) -> FarResult:
    """What a run hands back that ended after a later run started (``numbers``: its own and
    the later one's): nothing but the word, also left in its directory."""
    attempt, later = numbers
    why = (f"run number {attempt} of the task ended (exit code {code}) after run number {later} started: "
           "fenced, its result not handed back")
    log = b""
    with contextlib.suppress(OSError):  # the driver may have ended and removed the task's storage
        (work / OUTPUT_NAME).mkdir(exist_ok=True)
        (work / OUTPUT_NAME / FENCED).write_text(why + "\n", encoding="utf-8")
        log = _tail(work / "far.log")
    runs.fence(token, attempt, time.time())  # after the file: a node cut off from the head may never get through
    return FarResult(code, {}, log, node_identity(), why, started, attempt, fenced=True)


def _work_dir(storage: str, attempt: int, before: int) -> tuple[Path, dict[str, str]]:
    """This run's directory, and what tells its far run to resume: a private temporary one
    without ``storage``; else ``<storage>/attempt-<N>``, resuming from the latest earlier
    run's far directory that kept checkpoints (a lost run's directory stays: the retry reads
    it; the run that ends removes its own). ``before``: the runs of the task before this one."""
    if not storage:
        return Path(tempfile.mkdtemp(prefix="cmx-ray-far-")), {}
    base = Path(storage)
    work = base / f"{ATTEMPT_DIR}{attempt}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    earlier = [d for d in lost_runs(base) if d[0] < attempt and (d[1] / OUTPUT_NAME / "checkpoints").is_dir()]
    resume = {BASE_ENV: str(before)} if before else {}
    if earlier and _snapshot(earlier[-1][1] / OUTPUT_NAME / "checkpoints", work / RESUME_DIR / "checkpoints"):
        resume[RESUME_ENV] = str(work / RESUME_DIR)
    return work, resume


def _snapshot(checkpoints: Path, into: Path) -> bool:
    """Copy an earlier run's checkpoints into this run's directory before it starts: the
    earlier run may live on (cut off from the head) and change or remove them meanwhile.
    False when they went away during the copy (the run then starts over)."""
    try:
        shutil.copytree(checkpoints, into, ignore=shutil.ignore_patterns(".*.tmp"))
    except (OSError, shutil.Error):
        shutil.rmtree(into.parent, ignore_errors=True)
        return False
    return True


def lost_runs(storage: Path) -> list[tuple[int, Path]]:
    """The run directories in ``storage`` (runs lost, and any still running), by run number."""
    found = []
    for path in storage.glob(f"{ATTEMPT_DIR}*"):
        number = path.name.removeprefix(ATTEMPT_DIR)
        if path.is_dir() and number.isdigit():
            found.append((int(number), path))
    return sorted(found)


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
