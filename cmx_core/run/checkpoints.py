"""A step's checkpoint directory across its attempts (docs/faults.md).

``<run dir>/checkpoints/<node>/<step>/``: outside the node's work directory and the cache
staging area, so it survives a failed attempt, and handed to every attempt
(``StepContext.checkpoint_dir``, ``CMX_CHECKPOINT_DIR``). A step writes each checkpoint
file atomically (a temporary file renamed over it: ``StepContext.save_checkpoint`` does
so); the temporary files a killed attempt left are removed before the next attempt starts,
so it sees only complete checkpoints. The directory is removed when the step succeeds,
unless the step says ``checkpoint: {keep: true}``; a run that fails keeps it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

ENV = "CMX_CHECKPOINT_DIR"
ATTEMPT_ENV = "CMX_ATTEMPT"
RESUME_ENV = "CMX_RESUME_FROM"
"""The run directory of the attempt a job-level retry follows (a cluster executor sets it on
the far side: cmx-slurm's resubmitted array task, its requeued job): the run's checkpoints
start as a copy of that directory's ``checkpoints`` (:func:`seed`)."""
BASE_ENV = "CMX_ATTEMPT_BASE"
"""How many attempts of the job came before this run: its steps' attempts count on from it
(``CMX_ATTEMPT`` is ``BASE + 1`` for the first), as a step-level retry's do."""
_PARTIAL = ".*.tmp"  # the temporary files of cmx_core.datautil.atomic_write


def checkpoint_dir(run_dir: Path, node_dir: str, step_id: str) -> Path:
    return run_dir / "checkpoints" / node_dir / step_id


def seed(run_dir: Path, environ: Mapping[str, str] = os.environ) -> None:
    """Copy the earlier attempt's checkpoints (:data:`RESUME_ENV`) into a new run directory."""
    earlier = Path(environ[RESUME_ENV]) / "checkpoints" if environ.get(RESUME_ENV) else None
    if earlier is not None and earlier.is_dir() and not (run_dir / "checkpoints").exists():
        shutil.copytree(earlier, run_dir / "checkpoints", ignore=shutil.ignore_patterns(_PARTIAL))


def attempt_base(environ: Mapping[str, str] = os.environ) -> int:
    """The attempts of the job before this run (:data:`BASE_ENV`; 0 when not set)."""
    text = environ.get(BASE_ENV, "")
    return int(text) if text.isdigit() else 0


def prepare(path: Path) -> bool:
    """Make the directory, drop half-written files; whether it holds a checkpoint."""
    path.mkdir(parents=True, exist_ok=True)
    for partial in path.rglob(_PARTIAL):
        partial.unlink(missing_ok=True)
    return any(path.iterdir())


def last_write(path: Path, since: float) -> float | None:
    """When a file of the checkpoint was last written, if at or after ``since``."""
    times = [f.stat().st_mtime for f in path.rglob("*") if f.is_file() and not f.match(_PARTIAL)]
    latest = max(times, default=None)
    return latest if latest is not None and latest >= since else None


def finish(path: Path, keep: bool) -> None:
    """After the step succeeded: remove the checkpoint unless it is kept on purpose."""
    if keep:
        return
    shutil.rmtree(path, ignore_errors=True)
    for parent in (path.parent, path.parent.parent):  # <node>/ and checkpoints/, once empty
        with contextlib.suppress(OSError):
            parent.rmdir()
