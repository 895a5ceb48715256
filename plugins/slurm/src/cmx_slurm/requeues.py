"""Recoveries Slurm made itself, recorded: a job submitted with ``--requeue`` that Slurm put
back in the queue (its node lost, ``scontrol requeue``, a preemption) runs its batch script
again; each run appends a line to the stage directory's ``starts`` (:mod:`cmx_slurm.script`).
Every run but the last is a lost attempt of the job, recorded in the result's ``attempts``
(and so ``faults``) as the executor's own retries are: a run that Slurm recovered does not
look clean.

Without accounting (``sacct``) cmx cannot tell why Slurm requeued the job; the attempt's
fault is the first of ``node_lost`` and ``preempted`` that the job's policy names (the
policy that asked for ``--requeue``), and its message gives the controller's restart count.
A lost run's end is taken as the next run's start (the latest it can have been lost).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from cmx_core.api import ExecutionOutcome, ExecutionRequest, FaultClass, LostJobs, job_policy
from cmx_slurm.script import STARTS

LABEL = "slurm job"


def starts(stage: Path) -> list[float]:
    """When each run of the job's batch script started, in order."""
    try:
        lines = (stage / STARTS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            found.append(float(line.split()[0]))
        except (IndexError, ValueError):
            continue  # a line a killed run cut short
    return found


def requeue_fault(request: ExecutionRequest) -> FaultClass:
    """The class a requeue is recorded under: the first one of the policy's that asked for it."""
    named = job_policy(request).on
    return next((c for c in (FaultClass.NODE_LOST, FaultClass.PREEMPTED) if c in named), FaultClass.NODE_LOST)


def with_requeues(outcome: ExecutionOutcome, request: ExecutionRequest, stage: Path) -> ExecutionOutcome:
    """``outcome`` with an attempt for each run of the job Slurm requeued, when cmx recorded
    none of the job's attempts itself (``--inject kill-worker`` does); the run's start is the
    first run's (:class:`LostJobs` builds the attempts as it does for a resubmitted array task)."""
    runs = starts(stage)
    if len(runs) < 2 or any(a.step == LABEL for a in outcome.attempts):
        return outcome
    fault = requeue_fault(request)
    record = LostJobs(request.context.plan.root.id, LABEL, job_policy(request), runs[0])
    for number, (began, ended) in enumerate(itertools.pairwise(runs), start=1):
        record.lose(began, fault, f"Slurm requeued the job and ran it again (restart {number} of {len(runs) - 1})")
        record.lost[-1] = replace(record.lost[-1], ended=ended, work_lost_s=max(0.0, ended - began))
    return record.outcome(outcome, runs[-1], None)
