"""Waiting for jobs without flooding the controller.

The end of a job is noticed two ways: its batch script's last act writes ``ended`` into the
stage directory (a file check, free, every 50 ms), and ``squeue`` is asked, at most once per
interval, whether it is still queued: this catches a job that died without running its
script to the end (cancelled, killed at its time limit, a lost node). The interval starts
at ``poll_s`` and grows 1.5x per query up to ``poll_max_s``; one squeue call covers every
job being waited for (all tasks of an array). The end state and exit code come from
``scontrol show job``, and from ``sacct`` when the controller has already forgotten the job
and accounting answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cmx_core.api import JobStatus
from cmx_slurm import slurmcli
from cmx_slurm.script import ENDED, owned_by

TICK_S = 0.05
REQUEUE_CONFIRM_S = 5.0
"""How long a requeueable job that seems to have failed is watched for its return to the queue."""
REQUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RUNNING"})
"""States of a job that Slurm has put back in the queue (or already runs again)."""
SETTLE_S = 10.0
"""How long a job whose script has ended may stay COMPLETING before its exit code is taken
from the script's own record."""


@dataclass
class Backoff:
    """An interval that grows by ``factor`` each time it is used, up to ``cap``."""

    first: float
    cap: float
    factor: float = 1.5
    _next: float = field(default=0.0)
    _interval: float = field(default=0.0)

    def due(self, now: float) -> bool:
        """True (and the interval grows) when a query may be made at ``now``."""
        if now < self._next:
            return False
        self._interval = self.first if not self._interval else min(self._interval * self.factor, self.cap)
        self._next = now + self._interval
        return True


@dataclass(frozen=True)
class Watched:
    """One job to wait for: its Slurm id (``123`` or ``123_4``) and stage directory."""

    job_id: str
    stage: Path


def wait_all(jobs: Sequence[Watched], backoff: Backoff, clock: Callable[[], float] = time.monotonic,
             on_done: Callable[[str, JobStatus], None] | None = None,
             tick: Callable[[], None] | None = None) -> dict[str, JobStatus]:
    """Block until every job has ended; its :class:`JobStatus` by job id. ``on_done`` gets
    each job as soon as its status is known; ``tick`` is called once a round, and may append
    jobs to ``jobs`` (a list then) to be waited for too (a lost task resubmitted at once)."""
    done = _Done(on_done)
    ended_at: dict[str, float] = {}
    settle = Backoff(0.05, 1.0)
    while len(done) < len(jobs):
        now = clock()
        for job in jobs:
            if job.job_id not in done and job.job_id not in ended_at and ended(job):
                ended_at[job.job_id] = now
        pending = [j for j in jobs if j.job_id not in done]
        settling = [j for j in pending if j.job_id in ended_at]
        for job in settling if settling and settle.due(now) else ():  # the controller's word follows soon
            record = slurmcli.show(job.job_id)  # None: the controller forgot the job (an adopted one, MinJobAge)
            status = slurmcli.status_of(record) if record is not None else _from_script(job)
            if status is None and now - ended_at[job.job_id] > SETTLE_S:
                status = _from_script(job)
            if status is not None and requeued(job, status):
                del ended_at[job.job_id]  # its next run writes its own ended
            elif status is not None:
                done[job.job_id] = status
        running = [j for j in pending if j.job_id not in ended_at]
        if running and backoff.due(now):
            states = slurmcli.queued([j.job_id for j in running])
            for job in running:
                if states is not None and states.get(job.job_id) not in slurmcli.RUNNING:
                    status = _final(job)
                    if not requeued(job, status):
                        done[job.job_id] = status
        if tick is not None:
            tick()
        if len(done) < len(jobs):
            time.sleep(TICK_S)
    return dict(done)


class _Done(dict[str, JobStatus]):
    """The statuses found so far; each one handed to ``on_done`` as it is stored."""

    def __init__(self, on_done: Callable[[str, JobStatus], None] | None) -> None:
        super().__init__()
        self.on_done = on_done

    def __setitem__(self, job_id: str, status: JobStatus) -> None:
        super().__setitem__(job_id, status)
        if self.on_done is not None:
            self.on_done(job_id, status)


def requeued(job: Watched, status: JobStatus) -> bool:
    """True when a job that did not complete is one Slurm may requeue (``Requeue=1``: submitted
    with ``--requeue``) and is back in the queue within :data:`REQUEUE_CONFIRM_S`: while it
    requeues, Slurm shows the lost run's end (``FAILED``, ``NODE_FAIL``) for a moment. The lost
    run's ``ended`` is removed then (the next run writes its own). A job that stays ended
    past that window is not waited for: a requeued job Slurm could not start again (ended
    "non-startable", its credential revoked) is over, and is recorded as it ended."""
    first = slurmcli.show(job.job_id) if status.state != "completed" else None
    if first is None or first.fields.get("Requeue") != "1":
        return False
    deadline = time.monotonic() + REQUEUE_CONFIRM_S
    while True:
        record = slurmcli.show(job.job_id)
        if record is not None and (record.state.split("+", 1)[0] in REQUEUED
                                   or record.fields.get("Restarts") != first.fields.get("Restarts")):
            (job.stage / ENDED).unlink(missing_ok=True)
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.25)


def ended(job: Watched) -> bool:
    """True when the job's batch script has written its own ``ended`` (not a lost attempt's)."""
    try:
        return owned_by(job.stage, job.job_id)
    except OSError:
        return False


def _final(job: Watched) -> JobStatus:
    """The end of a job squeue no longer lists as running."""
    if ended(job):
        status = slurmcli.status_of(slurmcli.show(job.job_id))
        return status if status is not None else _from_script(job)
    record = slurmcli.show(job.job_id) or slurmcli.accounted(job.job_id)
    status = slurmcli.status_of(record)
    if status is None:  # listed as ended by squeue a moment ago, still running per scontrol
        return JobStatus("lost", None, f"Slurm reports job {job.job_id} as {record.state if record else '?'} "
                                       "after squeue stopped listing it")
    return status


def _from_script(job: Watched) -> JobStatus:
    """The exit code the batch script recorded itself."""
    text = (job.stage / ENDED).read_text(encoding="utf-8").split()
    code = int(text[0]) if text and text[0].isdigit() else None
    return JobStatus("completed" if code == 0 else "failed", code, "exit code recorded by the batch script")


def wait_gone(job_ids: Sequence[str], timeout_s: float = 30.0) -> bool:
    """Wait (bounded) until squeue lists none of the jobs; True when they are gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = slurmcli.queued(job_ids)
        if states is not None and not any(s in slurmcli.RUNNING for s in states.values()):
            return True
        time.sleep(0.2)
    return False
