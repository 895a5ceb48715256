"""Each run of a Ray task, recorded (docs/faults.md, "What Ray recovers and what cmx records").

Ray runs a task again by itself (``max_retries``, set when the policy retries ``node_lost``)
when its worker or node dies; a run Ray recovered must not look clean. The far side stamps
the start of each run of the task into the cluster's key-value store (held by the GCS on the
head, so it outlives any worker node), under the task's token and Ray's number for the run;
the driver reads the stamps once the task has ended (:func:`starts`). Every run but the last
is a lost attempt of the job, fault ``node_lost`` (the only one Ray retries here), ended when
the next run started (the latest it can have been lost). The run's wall time starts at its
first run's start; the time from the submission to that start is its queue time
(``timing.queue_s``), no longer counted as the run's own.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from cmx_core.api import ExecutionOutcome, ExecutionRequest, FaultClass, LostJobs, job_policy

NAMESPACE = "cmx-ray-runs"
LABEL = "ray job"


def attempt_number() -> int:
    """Ray's number for the run of the task this process is (0: the first); 0 outside a task."""
    try:
        from ray._private.worker import WORKER_MODE, global_worker  # deferred: optional ray, only in a task

        if global_worker.mode != WORKER_MODE:
            return 0
        return int(global_worker.core_worker.get_current_task_attempt_number())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - called outside Ray (tests, benchmarks): the first run
        return 0


def stamp(token: str, attempt: int, started: float) -> None:
    """Record (far side) that run ``attempt`` of task ``token`` started at ``started``; nothing
    outside a task (a test calling the far function directly)."""
    try:
        from ray.experimental import internal_kv  # deferred: optional ray, only in a task

        if internal_kv._internal_kv_initialized():  # type: ignore[no-untyped-call]
            internal_kv._internal_kv_put(f"{token}/{attempt:06d}", repr(started), namespace=NAMESPACE)
    except Exception:  # noqa: BLE001 - no cluster to tell: the driver then knows only the last run
        return


def starts(token: str) -> list[float]:
    """(Driver side, connected) When each run of task ``token`` started, in run order; the
    stamps are removed once read."""
    from ray.experimental import internal_kv  # deferred: ray only when this runs (513 modules)

    keys = sorted(internal_kv._internal_kv_list(f"{token}/", namespace=NAMESPACE))
    found = []
    for key in keys:
        value = internal_kv._internal_kv_get(key, namespace=NAMESPACE)
        try:
            found.append(float(value))
        except (TypeError, ValueError):
            continue
    internal_kv._internal_kv_del(f"{token}/", del_by_prefix=True, namespace=NAMESPACE)
    return found


def with_runs(outcome: ExecutionOutcome, request: ExecutionRequest, submitted: float,
              runs: list[float]) -> ExecutionOutcome:
    """``outcome`` with the task's own timing (its first run's start, its queue time beside
    it) and an attempt for each run Ray lost, when cmx recorded none of the job's attempts
    itself (``--inject kill-worker`` and cmx's own resubmissions do; their times stay the
    driver's)."""
    if not runs or any(a.step == LABEL for a in outcome.attempts):
        return outcome
    queued = max(0.0, runs[0] - submitted)
    if len(runs) < 2:
        return replace(outcome, started=min(runs[0], outcome.finished), queued_s=queued)
    record = LostJobs(request.context.plan.root.id, LABEL, job_policy(request), runs[0])
    for number, (began, ended) in enumerate(itertools.pairwise(runs), start=1):
        record.lose(began, FaultClass.NODE_LOST,
                    f"Ray ran the task again after its worker or node was lost (retry {number} of {len(runs) - 1})")
        record.lost[-1] = replace(record.lost[-1], ended=ended, work_lost_s=max(0.0, ended - began))
    return replace(record.outcome(outcome, runs[-1], None), queued_s=queued)
