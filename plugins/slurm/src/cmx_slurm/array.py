"""Many runs as one Slurm job array: the entry point for a sweep.

A sweep has N prepared runs (an :class:`~cmx_core.api.ExecutionRequest` each, with its own
run directory and ``lock.json``, all with the same :class:`SlurmSettings`). One ``sbatch
--array=0-(N-1)`` job runs them: array task *i* runs request *i*'s ``cmx run --lock``,
its output in that run's stage directory. The scheduler starts as many at once as fit.

    array = submit_array(requests, SlurmSettings(time="10"))
    outcomes = collect(array)          # waits; one ExecutionOutcome per request, in order
    # the caller records each one (cmx_core.run.recording.record_run), as the engine does

``wait_array`` waits for every task with one squeue call per interval; ``cancel_array``
cancels the whole array. A task lost to a fault its run's job policy retries (a lost node, a
preemption, its time limit: docs/faults.md) is resubmitted by :func:`collect` as a task of a
new array over the same script (``--array=3,7``) as soon as the policy's backoff has passed,
while the rest of the first array runs on; its outcome then carries every attempt. A point's
wall time is its own (from its task's first start), its wait in the queue ``timing.queue_s``.
Slurm's own requeue is off for arrays (``--no-requeue``): the batch resubmits, so nothing is
retried twice or without a policy. ``max_parallel`` maps to sbatch's ``%N`` array throttle.
A point whose stage directory holds a task an earlier (killed) driver submitted is adopted
(:func:`adopt_array`): its task is waited for, not submitted again.
:func:`run_many` is both steps, the executor's batch entry (``Executor.run_many``) that
``cmx sweep --executor slurm -j N`` calls, with N as the throttle: one array per resource
shape (points whose plans ask for different resources get an array each).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx_core.api import (
    ExecutionOutcome,
    ExecutionRequest,
    Fetched,
    JobStatus,
    LostJobs,
    RemoteJob,
    fold,
    job_fault,
    job_policy,
    set_aside,
)
from cmx_core.errors import CmxError, Interrupted, UsageError
from cmx_slurm import poll, script, slurmcli
from cmx_slurm.executor import (
    JOB_RECORD,
    STAGE_DIR,
    SlurmExecutor,
    resources_for,
    settings_of,
    with_log_tail,
    write_record,
)
from cmx_slurm.settings import SlurmSettings


@dataclass(frozen=True)
class ArrayJob:
    """A submitted array: its id and, in order, each of its tasks' job (``<id>_<i>``) and
    that job's index among the array's first submission (``positions``: a resubmission runs
    some of them again), the sbatch options and the script (what a resubmission reuses)."""

    array_id: str
    jobs: tuple[RemoteJob, ...]
    task_ids: tuple[str, ...]
    submitted: float
    settings: SlurmSettings
    positions: tuple[int, ...] = ()
    options: tuple[str, ...] = ()
    script: Path | None = None
    ntasks: int = 1


def submit_array(requests: Sequence[ExecutionRequest], settings: SlurmSettings | None = None, *,
                 max_parallel: int | None = None) -> ArrayJob:
    """Stage every request and submit them as one job array; the resources are those of
    the first request's plan (:func:`run_many` groups a sweep's points by shape first)."""
    if not requests:
        raise UsageError("submit_array: give at least one run")
    chosen = settings_of(settings if settings is not None else requests[0].context.settings)
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"submit_array: max_parallel={max_parallel!r}: use at least 1")
    executor = SlurmExecutor()
    jobs = tuple(executor.prepare(r) for r in requests)
    resources = resources_for(requests[0].context.plan, chosen)
    for job in jobs:
        script.write(job.stage_dir / script.TASK, script.task_script(job.command, job.env, job.stage_dir))
    home = jobs[0].stage_dir
    batch = script.write(home / "array.sh", script.array_script([j.stage_dir for j in jobs], resources.ntasks))
    throttle = f"%{max_parallel}" if max_parallel else ""
    options = [f"--job-name=cmx-sweep-{requests[0].context.plan.root.recipe.name}"[:120],
               f"--array=0-{len(jobs) - 1}{throttle}", f"--chdir={home}", f"--output={home}/slurm-%A_%a.array.out",
               "--no-requeue", *resources.sbatch_args()]
    return _submit(jobs, tuple(range(len(jobs))), tuple(options), batch, chosen, resources.ntasks)


def resubmit(array: ArrayJob, positions: Sequence[int]) -> ArrayJob:
    """The tasks at ``positions`` (indices of the first submission) as a new array over the
    same script and options: ``--array=3,7``, with the same throttle."""
    first = next(o for o in array.options if o.startswith("--array="))
    throttle = first[first.index("%"):] if "%" in first else ""
    options = tuple(f"--array={','.join(map(str, positions))}{throttle}" if o == first else o for o in array.options)
    where = dict(zip(array.positions, array.jobs, strict=True))
    assert array.script is not None
    for position in positions:  # the lost attempt's ``ended`` must not be taken for the retry's
        script.clear_marks(where[position].stage_dir)
    return _submit(tuple(where[p] for p in positions), tuple(positions), options, array.script, array.settings,
                   array.ntasks)


def _submit(jobs: tuple[RemoteJob, ...], positions: tuple[int, ...], options: tuple[str, ...], batch: Path,
            settings: SlurmSettings, ntasks: int) -> ArrayJob:
    submitted = time.time()
    array_id = slurmcli.sbatch(list(options), batch)
    task_ids = tuple(f"{array_id}_{p}" for p in positions)
    for position, job, task_id in zip(positions, jobs, task_ids, strict=True):
        record = {"job_id": task_id, "array": array_id, "index": position, "tasks": ntasks, "submitted": submitted,
                  "sbatch": ["sbatch", "--parsable", *options, str(batch)]}
        write_record(job.stage_dir / JOB_RECORD, record)
    return ArrayJob(array_id, jobs, task_ids, submitted, settings, positions, options, batch, ntasks)


def wait_array(array: ArrayJob, on_done: Callable[[int, JobStatus], None] | None = None) -> tuple[JobStatus, ...]:
    """Block until every task has ended (Ctrl-C cancels the array); statuses in order.
    ``on_done`` gets each task (its index, its status with the log's tail) as it ends."""
    watched = [poll.Watched(t, j.stage_dir) for t, j in zip(array.task_ids, array.jobs, strict=True)]
    where = {t: i for i, t in enumerate(array.task_ids)}

    def ended(task_id: str, status: JobStatus) -> None:
        if on_done is not None:
            index = where[task_id]
            on_done(index, with_log_tail(status, array.jobs[index].stage_dir / "slurm.out"))

    try:
        found = poll.wait_all(watched, poll.Backoff(array.settings.poll_s, array.settings.poll_max_s),
                              on_done=ended)
    except (KeyboardInterrupt, Interrupted):
        cancel_array(array)
        raise Interrupted(f"interrupted; slurm job array {array.array_id} was cancelled") from None
    return tuple(with_log_tail(found[t], j.stage_dir / "slurm.out")
                 for t, j in zip(array.task_ids, array.jobs, strict=True))


def collect(array: ArrayJob, on_outcome: Callable[[int, ExecutionOutcome], None] | None = None
            ) -> tuple[ExecutionOutcome, ...]:
    """Wait, folding each point's far result into its :class:`ExecutionOutcome` as its task
    ends (handed to ``on_outcome`` with its index then); outcomes in order. A task lost to a
    fault its job policy retries is resubmitted (:func:`resubmit`) as soon as the policy's
    backoff has passed, while the rest of the array runs on, until it ends otherwise."""
    batch = _Collect(array, on_outcome)
    try:
        while True:
            poll.wait_all(batch.watched, poll.Backoff(array.settings.poll_s, array.settings.poll_max_s),
                          on_done=batch.ended, tick=batch.resubmit_due)
            if not batch.due:
                return tuple(batch.outcomes[i] for i in range(len(array.jobs)))
            time.sleep(max(0.0, min(batch.due.values()) - time.monotonic()))
            batch.resubmit_due()
    except (KeyboardInterrupt, Interrupted):
        for each in batch.arrays:
            _cancel_quietly(each)
        raise Interrupted(f"interrupted; slurm job array(s) {', '.join(a.array_id for a in batch.arrays)} "
                          "were cancelled") from None


class _Collect:
    """What :func:`collect` keeps while it waits: the arrays submitted (the first and each
    resubmission), the tasks still watched, each point's lost attempts, the points due for a
    resubmission (when, by the monotonic clock) and the outcomes so far."""

    def __init__(self, array: ArrayJob, on_outcome: Callable[[int, ExecutionOutcome], None] | None) -> None:
        self.first, self.on_outcome = array, on_outcome
        self.local = {position: i for i, position in enumerate(array.positions)}
        self.arrays: list[ArrayJob] = []
        self.tasks: dict[str, tuple[ArrayJob, int]] = {}
        self.watched: list[poll.Watched] = []
        self.lost = {p: LostJobs(job.request.context.plan.root.id, "slurm job", job_policy(job.request),
                                 array.submitted) for p, job in zip(array.positions, array.jobs, strict=True)}
        self.queued: dict[int, float] = {}
        self.due: dict[int, float] = {}
        self.outcomes: dict[int, ExecutionOutcome] = {}
        self._watch(array)

    def _watch(self, array: ArrayJob) -> None:
        self.arrays.append(array)
        for task, (task_id, job) in enumerate(zip(array.task_ids, array.jobs, strict=True)):
            self.tasks[task_id] = (array, task)
            self.watched.append(poll.Watched(task_id, job.stage_dir))

    def ended(self, task_id: str, status: JobStatus) -> None:
        """One task has ended: its point's outcome, or (a fault its policy retries) its
        resubmission scheduled after the policy's backoff."""
        current, task = self.tasks[task_id]
        position, job = current.positions[task], current.jobs[task]
        status = with_log_tail(status, job.stage_dir / "slurm.out")
        began = task_start(job.stage_dir, current.submitted)  # the task's own start, not the array's submission
        record, index = self.lost[position], self.local[position]
        if record.number == 1:
            record.first_started = began
            self.queued[position] = max(0.0, began - current.submitted)
        outcome = fold(job, status, Fetched(logs=_logs(job.stage_dir)), began, "slurm", own_timing=True)
        fault = job_fault(status, outcome)
        if fault is not None and record.retries(fault):
            wait_s = record.lose(min(began, outcome.started), fault, outcome.error.message if outcome.error else "")
            self.due[position] = time.monotonic() + wait_s
            set_aside(job.local_output, record.number - 1)
            resumed = {**job.env, **script.resume_env(Path(job.far_output), record.number - 1)}
            script.write(job.stage_dir / script.TASK, script.task_script(job.command, resumed, job.stage_dir))
            return
        self.outcomes[index] = replace(record.outcome(outcome, min(began, outcome.started), fault),
                                       queued_s=self.queued.get(position))
        if self.on_outcome is not None:
            self.on_outcome(index, self.outcomes[index])

    def resubmit_due(self) -> None:
        """Resubmit, as one new array, every lost task whose backoff has passed."""
        now = time.monotonic()
        ready = sorted(p for p, at in self.due.items() if at <= now)
        if ready:
            for position in ready:
                del self.due[position]
            self._watch(resubmit(self.first, ready))


def task_start(stage: Path, otherwise: float) -> float:
    """When the task's batch script started (its ``started`` stamp), else ``otherwise`` (a
    task that never started: the submission)."""
    try:
        return float((stage / script.STARTED).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return otherwise


def shapes(requests: Sequence[ExecutionRequest]) -> list[tuple[int, ...]]:
    """The requests (by index) grouped by the resources their plans ask for (nodes, tasks,
    CPUs, GPUs, memory, time...), in order of their first request: an array has one shape, so
    each group is an array of its own."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, request in enumerate(requests):
        resources = resources_for(request.context.plan, settings_of(request.context.settings))
        groups.setdefault((str(resources.ntasks), *resources.sbatch_args()), []).append(index)
    return [tuple(indices) for indices in groups.values()]


def run_many(requests: Sequence[ExecutionRequest], max_parallel: int) -> tuple[ExecutionOutcome, ...]:
    """Submit the requests as one array per shape (:func:`shapes`: each point gets its own
    resources), at most ``max_parallel`` tasks of each running at once (no throttle when
    that covers them all), and wait for every outcome; outcomes in request order. Ctrl-C
    cancels every array."""
    outcomes: dict[int, ExecutionOutcome] = {}
    run_each(requests, max_parallel, outcomes.__setitem__)
    return tuple(outcomes[i] for i in range(len(requests)))


def run_each(requests: Sequence[ExecutionRequest], max_parallel: int,
             on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    """:func:`run_many` handing each outcome (with its request's index) to ``on_outcome`` as
    soon as its task has ended: the batch entry a sweep uses, recording each point then."""
    adopted = adoptions(requests)
    taken = {i for indices, _ in adopted for i in indices}
    fresh = [i for i in range(len(requests)) if i not in taken]
    groups = [indices for indices, _ in adopted] + \
        [tuple(fresh[k] for k in group) for group in shapes([requests[i] for i in fresh])]
    arrays: list[ArrayJob] = []
    try:
        for indices, records in adopted:
            arrays.append(adopt_array([requests[i] for i in indices], records))
        for indices in groups[len(adopted):]:
            throttle = max_parallel if max_parallel < len(indices) else None
            arrays.append(submit_array([requests[i] for i in indices], max_parallel=throttle))
        for indices, array in zip(groups, arrays, strict=True):
            collect(array, _renumbered(indices, on_outcome))
    except (KeyboardInterrupt, Interrupted):
        for array in arrays:
            _cancel_quietly(array)
        raise Interrupted(f"interrupted; slurm job array(s) {', '.join(a.array_id for a in arrays)} "
                          "were cancelled") from None


def adoptions(requests: Sequence[ExecutionRequest]) -> list[tuple[tuple[int, ...], tuple[dict[str, Any], ...]]]:
    """The requests (by index, with their job records) whose stage directory holds an array
    task an earlier driver submitted (``cmx sweep --resume`` of a killed sweep hands them
    over with their run directories), grouped by that array."""
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, request in enumerate(requests):
        record = _job_record(request.run_dir / STAGE_DIR / JOB_RECORD)
        if record is not None:
            groups.setdefault(str(record["array"]), []).append((index, record))
    return [(tuple(i for i, _ in group), tuple(r for _, r in group)) for group in groups.values()]


def adopt_array(requests: Sequence[ExecutionRequest], records: Sequence[dict[str, Any]]) -> ArrayJob:
    """The tasks of one array an earlier driver submitted, to be waited for (and, when lost,
    resubmitted over the same script) instead of run again: a killed driver's pending tasks
    run on by themselves."""
    executor = SlurmExecutor()
    argv = [str(a) for a in records[0]["sbatch"]]
    return ArrayJob(str(records[0]["array"]), tuple(executor.prepare(r) for r in requests),
                    tuple(str(r["job_id"]) for r in records), float(records[0].get("submitted") or time.time()),
                    settings_of(requests[0].context.settings), tuple(int(r["index"]) for r in records),
                    tuple(argv[2:-1]), Path(argv[-1]), int(records[0].get("tasks") or 1))


def _job_record(path: Path) -> dict[str, Any] | None:
    """An array task's record (:data:`JOB_RECORD`), or None (none, or a single job's)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    wanted = ("array", "index", "job_id", "sbatch")
    return record if isinstance(record, dict) and all(k in record for k in wanted) else None


def cancel_array(array: ArrayJob) -> None:
    """Cancel every task of the array and wait (bounded) until they leave the queue."""
    slurmcli.scancel(array.array_id)
    poll.wait_gone(list(array.task_ids))


def _renumbered(indices: Sequence[int], on_outcome: Callable[[int, ExecutionOutcome], None]
                ) -> Callable[[int, ExecutionOutcome], None]:
    """``on_outcome`` for one array: its task index turned back into the request's."""
    return lambda index, outcome: on_outcome(indices[index], outcome)


def _cancel_quietly(array: ArrayJob) -> None:
    """Cancel an array that may have ended (or been cancelled) already."""
    try:
        cancel_array(array)
    except CmxError:
        pass


def _logs(stage: Path) -> tuple[Path, ...]:
    return tuple(stage / n for n in ("slurm.out", script.TASK, JOB_RECORD) if (stage / n).is_file())
