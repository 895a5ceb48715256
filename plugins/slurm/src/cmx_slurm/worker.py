"""``--inject kill-worker`` on Slurm (docs/faults.md): the job's node is set DOWN with
``scontrol update nodename=NODE state=down``, which is how a lost node looks to the
controller: it ends the job (``NODE_FAIL``) or, for a job submitted with ``--requeue``,
puts it back in the queue. The node is resumed at once (on a cluster with
``ReturnToService=2`` it comes back by itself when its slurmd registers again), so the job
can run again; the requeued job runs after Slurm's own requeue delay.

When the job ran again is the new stamp its batch script writes (``started``,
:mod:`cmx_slurm.script`). Every wait is bounded by :data:`DEADLINE_S`.
"""

from __future__ import annotations

import time
from pathlib import Path

from cmx_core.api import FaultClass, WorkerKill
from cmx_core.errors import CmxError
from cmx_slurm import slurmcli
from cmx_slurm.script import ENDED, STARTED

DEADLINE_S = 600.0
TICK_S = 0.2
REASON = "cmx --inject kill-worker"
REQUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


def kill_worker(job_id: str, stage: Path) -> WorkerKill:
    """Set the node of running job ``job_id`` down, resume it, and follow the job."""
    deadline = time.monotonic() + DEADLINE_S
    node = _node_once_running(job_id, stage, deadline)
    first = _stamp(stage)
    struck = time.time()
    down = slurmcli.call(["scontrol", "update", f"nodename={node}", "state=down", f"reason={REASON}"])
    if down.returncode != 0:
        raise CmxError(f"scontrol could not set node {node} down (it needs the Slurm admin): {down.stderr.strip()}")
    try:
        state = _after_loss(job_id, deadline)
        lost_at = time.time()
    finally:
        resume(node)
    restarted = _restarted(job_id, stage, first, deadline) if state in REQUEUED else None
    return WorkerKill(struck, lost_at, restarted, FaultClass.NODE_LOST,
                      f"Slurm: node {node} set down ({REASON}); job {job_id} {state or 'ended'}")


def _node_once_running(job_id: str, stage: Path, deadline: float) -> str:
    """The job's node, once squeue lists the job RUNNING (and its batch script started)."""
    while time.monotonic() < deadline:
        proc = slurmcli.call(["squeue", "-h", "-j", job_id, "-o", "%T %N"])
        state, _, node = proc.stdout.strip().partition(" ")
        if state == "RUNNING" and node and (stage / STARTED).exists():
            return node.strip()
        if proc.returncode != 0 or (state and state not in slurmcli.RUNNING) or (stage / ENDED).exists():
            raise CmxError(f"job {job_id} ended before its node could be set down")
        time.sleep(TICK_S)
    raise CmxError(f"job {job_id} did not start within {DEADLINE_S:g} s")


def _after_loss(job_id: str, deadline: float) -> str | None:
    """The job's state once the controller has taken it off the node: requeued (PENDING...)
    or None when it left the queue (NODE_FAIL)."""
    while time.monotonic() < deadline:
        state = (slurmcli.queued([job_id]) or {}).get(job_id)
        if state is None or state in REQUEUED or state not in slurmcli.RUNNING:
            return state if state in REQUEUED else None
        time.sleep(TICK_S)
    raise CmxError(f"Slurm still runs job {job_id} {DEADLINE_S:g} s after its node was set down")


def _restarted(job_id: str, stage: Path, first: str, deadline: float) -> float | None:
    """When the requeued job's batch script started again (None: it left the queue first)."""
    while time.monotonic() < deadline:
        stamp = _stamp(stage)
        if stamp and stamp != first:
            try:
                return float(stamp)
            except ValueError:  # being written
                pass
        elif job_id not in (slurmcli.queued([job_id]) or {job_id: ""}):
            return None
        time.sleep(TICK_S)
    return None


def _stamp(stage: Path) -> str:
    try:
        return (stage / STARTED).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def resume(node: str, timeout_s: float = 60.0) -> None:
    """Bring the node back (``state=resume``) until sinfo no longer shows it down; a node that
    came back by itself (``ReturnToService``) refuses the resume as an invalid state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        slurmcli.call(["scontrol", "update", f"nodename={node}", "state=resume"])
        shown = slurmcli.call(["sinfo", "-h", "-n", node, "-o", "%t"]).stdout.strip()
        if shown and not any(word in shown for word in ("down", "drain", "fail")):
            return
        time.sleep(1.0)
    raise CmxError(f"node {node} is still down {timeout_s:g} s after cmx set it down; "
                   f"run: scontrol update nodename={node} state=resume")
