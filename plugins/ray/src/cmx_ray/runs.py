"""Each run of a Ray task, recorded and fenced (docs/faults.md, "What Ray recovers and what
cmx records").

Ray runs a task again by itself (``max_retries``, set when the policy retries ``node_lost``)
when its worker or node is lost; a run Ray recovered must not look clean. The far side stamps
the start of each run of the task into the cluster's key-value store (held by the GCS on the
head, so it outlives any worker node), under the task's token and Ray's number for the run;
the driver reads the stamps once the task has ended (:func:`read`). Every run but the last
is a lost attempt of the job, fault ``node_lost`` (the only one Ray retries here), ended when
the next run started (the latest it can have been lost). The run's wall time starts at its
first run's start; the time from the submission to that start is its queue time
(``timing.queue_s``), no longer counted as the run's own.

Fencing: the run number is the run's epoch. A run that was given up for lost but lived on
(its node cut from the head, not dead) may end after a later run started; before it hands
its result back it asks whether a later run has started (:func:`superseded`), and if so it
hands back nothing and says so in the store (``fenced``). The driver refuses a result from
any run but the latest that started, whatever Ray delivers, and the lost attempt's record
says its late result was refused.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from cmx_core.api import ExecutionOutcome, ExecutionRequest, FaultClass, LostJobs, job_policy

NAMESPACE = "cmx-ray-runs"
LABEL = "ray job"
_FENCED = "fenced"


@dataclass(frozen=True)
class TaskRuns:
    """What the store says of one task's runs: each run's start by its number, and the runs
    that ended after a later one started (fenced: their result was not handed back)."""

    starts: dict[int, float] = field(default_factory=dict)
    fenced: frozenset[int] = frozenset()

    @property
    def latest(self) -> int | None:
        """The number of the last run that started (None: none did)."""
        return max(self.starts, default=None)


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
    _put(f"{token}/{attempt:06d}", repr(started))


def superseded(token: str, attempt: int) -> int | None:
    """(Far side) The number of a later run of task ``token`` that has started, if any: this
    run was given up for lost. None where the store cannot be asked (the driver checks too)."""
    try:
        later = [n for n in read(token, remove=False).starts if n > attempt]
    except Exception:  # noqa: BLE001 - no cluster to ask (outside a task): nothing known to be later
        return None
    return max(later, default=None)


def fence(token: str, attempt: int, ended: float) -> None:
    """Record (far side) that run ``attempt`` ended after a later run started and handed nothing back."""
    _put(f"{token}/{_FENCED}/{attempt:06d}", repr(ended))


def _put(key: str, value: str) -> None:
    try:
        from ray.experimental import internal_kv  # deferred: optional ray, only in a task

        if internal_kv._internal_kv_initialized():  # type: ignore[no-untyped-call]
            internal_kv._internal_kv_put(key, value, namespace=NAMESPACE)
    except Exception:  # noqa: BLE001 - no cluster to tell: the driver then knows only the last run
        return


def read(token: str, remove: bool = True) -> TaskRuns:
    """(Connected) What the store says of task ``token``'s runs; with ``remove`` (the driver,
    once the task has ended) the entries are removed once read."""
    from ray.experimental import internal_kv  # deferred: ray only when this runs (513 modules)

    starts: dict[int, float] = {}
    fenced: set[int] = set()
    for key in internal_kv._internal_kv_list(f"{token}/", namespace=NAMESPACE):
        parts = key.decode().split("/")
        if not parts[-1].isdigit():
            continue
        if parts[1] == _FENCED:
            fenced.add(int(parts[-1]))
            continue
        try:
            starts[int(parts[-1])] = float(internal_kv._internal_kv_get(key, namespace=NAMESPACE))
        except (TypeError, ValueError):
            continue
    if remove:
        internal_kv._internal_kv_del(f"{token}/", del_by_prefix=True, namespace=NAMESPACE)
    return TaskRuns(starts, frozenset(fenced))


def refusal(runs: TaskRuns, attempt: int) -> str:
    """Why the result of run ``attempt`` is refused (a later run started), or ""."""
    latest = runs.latest
    if latest is None or attempt >= latest:
        return ""
    return (f"the result handed back came from run {attempt + 1} of the Ray task, given up for lost when run "
            f"{latest + 1} started: refused (fenced)")


def with_runs(outcome: ExecutionOutcome, request: ExecutionRequest, submitted: float,
              runs: TaskRuns) -> ExecutionOutcome:
    """``outcome`` with the task's own timing (its first run's start, its queue time beside
    it) and an attempt for each run Ray lost, when cmx recorded none of the job's attempts
    itself (``--inject kill-worker`` and cmx's own resubmissions do; their times stay the
    driver's)."""
    if not runs.starts or any(a.step == LABEL for a in outcome.attempts):
        return outcome
    numbers = sorted(runs.starts)
    begun = [runs.starts[n] for n in numbers]
    queued = max(0.0, begun[0] - submitted)
    if len(begun) < 2:  # a batch point's own start (its far run's) is later still: kept
        return replace(outcome, started=min(max(begun[0], outcome.started), outcome.finished), queued_s=queued)
    record = LostJobs(request.context.plan.root.id, LABEL, job_policy(request), begun[0])
    for index, (began, ended) in enumerate(itertools.pairwise(begun)):
        late = "; it lived on and its late result was refused (fenced)" if numbers[index] in runs.fenced else ""
        record.lose(began, FaultClass.NODE_LOST, "Ray ran the task again after its worker or node was lost "
                                                 f"(retry {index + 1} of {len(begun) - 1}){late}")
        record.lost[-1] = replace(record.lost[-1], ended=ended, work_lost_s=max(0.0, ended - began))
    return replace(record.outcome(outcome, begun[-1], None), queued_s=queued)
