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

Ray reruns nothing while the connection to the task's worker stands, even once the GCS has
declared the worker's node dead (a node cut off from the head: measured on the test bed,
docs/faults.md). The driver watches for that (:func:`cut_off`): a run whose node is declared
dead and that Ray has not started again within :data:`GRACE_S` is given up, and cmx submits
the task again (a new *submission*, when the policy retries ``node_lost``) or ends the run
as lost.

Fencing: each run's number is its epoch, ``submission * PER_SUBMISSION + Ray's number``, so a
later submission's runs outrank every run of an earlier one. A run that was given up but
lived on (its node cut off, not dead) may end after a later run started; before it starts
and before it hands its result back it asks whether a later run has started
(:func:`superseded`: the shared storage's run directories first, which a node cut off from
the head still reaches, then the store), and if so it hands back nothing and says so
(``fenced``, in its directory and in the store). The driver refuses a result from any run
but the latest that started, whatever Ray delivers, and the lost attempt's record says its
late result was refused.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from cmx_core.api import ExecutionOutcome, ExecutionRequest, FaultClass, LostJobs, job_policy

NAMESPACE = "cmx-ray-runs"
LABEL = "ray job"
_FENCED = "fenced"
PER_SUBMISSION = 1000
"""Run numbers per submission of a task: Ray's retries of one submission stay below it
(``max_retries`` is capped under it)."""
GRACE_S = 30.0
"""How long after the GCS declared a running run's node dead the driver waits for Ray to
start the task again by itself (it does at once when the worker's connection broke: a killed
raylet) before it gives the run up as cut off."""


@dataclass(frozen=True)
class TaskRuns:
    """What the store says of one task's runs: each run's start by its number, and the runs
    that ended after a later one started (fenced: their result was not handed back)."""

    starts: dict[int, float] = field(default_factory=dict)
    fenced: frozenset[int] = frozenset()
    nodes: dict[int, str] = field(default_factory=dict)
    """The Ray node each run started on (its id), by run number."""

    @property
    def latest(self) -> int | None:
        """The number of the last run that started (None: none did)."""
        return max(self.starts, default=None)

    def ordinal(self, number: int) -> int:
        """Run ``number``'s place among the task's runs (1: the first)."""
        return sum(1 for n in self.starts if n < number) + 1


@dataclass(frozen=True)
class GivenUp:
    """A run the driver gave up as cut off (:func:`cut_off`): when, and why."""

    number: int
    at: float
    why: str


def attempt_number() -> int:
    """Ray's number for the run of the task this process is (0: the first); 0 outside a task."""
    try:
        from ray._private.worker import WORKER_MODE, global_worker  # deferred: optional ray, only in a task

        if global_worker.mode != WORKER_MODE:
            return 0
        return int(global_worker.core_worker.get_current_task_attempt_number())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - called outside Ray (tests, benchmarks): the first run
        return 0


def node_id() -> str:
    """The id of the Ray node this task runs on; "" outside a task."""
    try:
        import ray  # deferred: optional ray, only in a task

        return str(ray.get_runtime_context().get_node_id()) if ray.is_initialized() else ""
    except Exception:  # noqa: BLE001 - called outside Ray (tests, benchmarks): no node
        return ""


def stamp(token: str, attempt: int, started: float, node: str = "") -> None:
    """Record (far side) that run ``attempt`` of task ``token`` started at ``started`` on Ray
    node ``node``; nothing outside a task (a test calling the far function directly)."""
    _put(f"{token}/{attempt:06d}", json.dumps({"started": started, "node": node}))


def superseded(token: str, attempt: int, later_runs: Sequence[int] = ()) -> int | None:
    """(Far side) The number of a later run of task ``token`` that has started, if any: this
    run was given up. ``later_runs``: the runs the shared storage holds (it answers first, and
    a node cut off from the head still reaches it); then the store. None where neither knows
    of one (the driver checks too)."""
    known = [n for n in later_runs if n > attempt]
    if known:
        return max(known)
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
    nodes: dict[int, str] = {}
    fenced: set[int] = set()
    for key in internal_kv._internal_kv_list(f"{token}/", namespace=NAMESPACE):
        parts = key.decode().split("/")
        if not parts[-1].isdigit():
            continue
        if parts[1] == _FENCED:
            fenced.add(int(parts[-1]))
            continue
        try:
            value = json.loads(internal_kv._internal_kv_get(key, namespace=NAMESPACE))
            starts[int(parts[-1])] = float(value["started"])
            nodes[int(parts[-1])] = str(value.get("node") or "")
        except (TypeError, ValueError, KeyError):
            continue
    if remove:
        internal_kv._internal_kv_del(f"{token}/", del_by_prefix=True, namespace=NAMESPACE)
    return TaskRuns(starts, frozenset(fenced), nodes)


def cut_off(runs: TaskRuns, dead_since: Mapping[str, float], now: float) -> tuple[int, str] | None:
    """The latest run and its node when that node has been declared dead (``dead_since``: the
    driver's first sight of each dead node) for :data:`GRACE_S` without Ray starting the task
    again: a run cut off from the head, which Ray will not rerun while its connection stands."""
    latest = runs.latest
    if latest is None:
        return None
    node = runs.nodes.get(latest, "")
    since = dead_since.get(node) if node else None
    if since is None or now - since < GRACE_S:
        return None
    return latest, node


def refusal(runs: TaskRuns, attempt: int) -> str:
    """Why the result of run ``attempt`` is refused (a later run started), or ""."""
    latest = runs.latest
    if latest is None or attempt >= latest:
        return ""
    return (f"the result handed back came from run {runs.ordinal(attempt)} of the Ray task, given up when run "
            f"{runs.ordinal(latest)} started: refused (fenced)")


def with_runs(outcome: ExecutionOutcome, request: ExecutionRequest, submitted: float,
              runs: TaskRuns, given_up: Sequence[GivenUp] = ()) -> ExecutionOutcome:
    """``outcome`` with the task's own timing (its first run's start, its queue time beside
    it) and an attempt for each run Ray lost or the driver gave up as cut off (``given_up``),
    when cmx recorded none of the job's attempts itself (``--inject kill-worker`` and cmx's
    own resubmissions do; their times stay the driver's)."""
    if not runs.starts or any(a.step == LABEL for a in outcome.attempts):
        return outcome
    numbers = sorted(runs.starts)
    begun = [runs.starts[n] for n in numbers]
    queued = max(0.0, begun[0] - submitted)
    if len(begun) < 2:  # a batch point's own start (its far run's) is later still: kept
        return replace(outcome, started=min(max(begun[0], outcome.started), outcome.finished), queued_s=queued)
    gave_up = {g.number: g for g in given_up}
    record = LostJobs(request.context.plan.root.id, LABEL, job_policy(request), begun[0])
    for index, (began, ended) in enumerate(itertools.pairwise(begun)):
        late = "; it lived on and its late result was refused (fenced)" if numbers[index] in runs.fenced else ""
        cut = gave_up.get(numbers[index])
        why = cut.why if cut else "Ray ran the task again after its worker or node was lost"
        record.lose(began, FaultClass.NODE_LOST, f"{why} (retry {index + 1} of {len(begun) - 1}){late}")
        ended = min(ended, cut.at) if cut else ended
        record.lost[-1] = replace(record.lost[-1], ended=ended, work_lost_s=max(0.0, ended - began))
    return replace(record.outcome(outcome, begun[-1], None), queued_s=queued)

