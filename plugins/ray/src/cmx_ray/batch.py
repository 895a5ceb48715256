"""Many runs as one batch of Ray tasks over one connection: the entry point for a sweep.

A sweep has N prepared runs (an :class:`~cmx_core.api.ExecutionRequest` each, with its own
run directory and ``lock.json``, all with the same :class:`RaySettings`). :func:`run_batch`
connects once (or starts one private cluster for the whole batch), checks once that the
cluster has what the tasks need, submits every task at once (Ray runs as many at a time as
the cluster's CPUs allow) and folds each far result into its
:class:`~cmx_core.api.ExecutionOutcome`, in the order of the requests::

    outcomes = run_batch(requests, RaySettings(address="head:6379"))
    # the caller records each one (cmx_core.run.recording.record_run), as the engine does

With ``max_parallel=N`` (``cmx sweep --executor ray -j N`` calls :func:`run_many`, the
executor's batch entry) at most N tasks are submitted at a time: the next is submitted when
the oldest one still submitted has ended, so the points end in order and a long point holds
the later ones back; without it every task is submitted at once.

Ctrl-C cancels every task that has not ended. A task's ``timeout_s`` counts from when the
batch starts waiting for it, so a task queued behind others may get more than that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from cmx_core.api import ExecutionOutcome, ExecutionRequest, Interrupted, JobStatus, RemoteJob, UsageError, fold
from cmx_ray import cluster, runs
from cmx_ray.executor import RayExecutor, RayHandle, refuse_missing, task_runs
from cmx_ray.resources import task_resources
from cmx_ray.settings import RaySettings


def run_batch(requests: Sequence[ExecutionRequest], settings: RaySettings | None = None, *,
              max_parallel: int | None = None,
              on_outcome: Callable[[int, ExecutionOutcome], None] | None = None) -> tuple[ExecutionOutcome, ...]:
    """Run every request as a Ray task (all submitted at once, or at most ``max_parallel`` at
    a time); outcomes in request order. ``on_outcome`` gets each one (with its request's
    index) as soon as its task has ended and its result is fetched."""
    if not requests:
        raise UsageError("run_batch: give at least one run")
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"run_batch: max_parallel={max_parallel!r}: use at least 1")
    chosen = settings if settings is not None else requests[0].context.settings
    if not isinstance(chosen, RaySettings):
        raise UsageError(f"run_batch: settings must be RaySettings, not {type(chosen).__name__}")
    executor = RayExecutor()
    with cluster.session(chosen.address, chosen.cluster_cpus) as where:
        executor.cluster_name = where
        first = requests[0]
        refuse_missing(task_resources(first.context.plan, chosen, first.context.gpus), where)
        jobs = [executor.prepare(request) for request in requests]
        started = time.time()
        handles: list[RayHandle] = []
        outcomes: list[ExecutionOutcome] = []

        def ended(index: int, status: JobStatus) -> None:
            job, handle = jobs[index], handles[index]
            outcome = fold(job, status, executor.fetch(handle, job), started, executor.name, own_timing=True)
            outcome = runs.with_runs(outcome, job.request, handle.submitted, task_runs(handle, job.request.run_dir),
                                     handle.given_up)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(index, outcome)

        try:
            _submit_and_wait(executor, jobs, handles, max_parallel or len(jobs), ended)
        except (KeyboardInterrupt, Interrupted):
            _cancel_all(handles)
            raise Interrupted(f"interrupted; the batch's {len(handles)} Ray tasks were cancelled") from None
        return tuple(outcomes)


def run_many(requests: Sequence[ExecutionRequest], max_parallel: int) -> tuple[ExecutionOutcome, ...]:
    """The executor's batch entry: :func:`run_batch` with each request's own settings."""
    return run_batch(requests, max_parallel=max_parallel)


def run_each(requests: Sequence[ExecutionRequest], max_parallel: int,
             on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    """The batch entry a sweep uses: each outcome handed over as soon as its task has ended
    (the sweep records it then)."""
    run_batch(requests, max_parallel=max_parallel, on_outcome=on_outcome)


def _submit_and_wait(executor: RayExecutor, jobs: Sequence[RemoteJob], handles: list[RayHandle],
                     window: int, ended: Callable[[int, JobStatus], None]) -> None:
    """Keep ``window`` tasks submitted (the first ``window`` at once), waiting for them in
    order and handing each to ``ended`` as it ends; ``handles`` grows as tasks are submitted
    (what Ctrl-C must cancel)."""
    handles.extend(executor.submit_checked(job, check_cluster=False) for job in jobs[:window])
    for index in range(len(jobs)):
        status = executor.wait(handles[index])
        if len(handles) < len(jobs):
            handles.append(executor.submit_checked(jobs[len(handles)], check_cluster=False))
        ended(index, status)


def _cancel_all(handles: Sequence[RayHandle]) -> None:
    """Cancel every task without force (each kills its child's process group and ends), then
    force only those still running after 10 s. A force-cancel of a task that has already ended
    can abort the driver inside Ray's core worker ("Tried to complete task that was not
    pending", seen once here), taking this process with it."""
    import ray  # deferred: ray only when this runs (513 modules)

    refs = [handle.ref for handle in handles]
    for ref in refs:
        ray.cancel(ref, force=False)
    _, running = ray.wait(refs, num_returns=len(refs), timeout=10.0)
    for ref in running:
        ray.cancel(ref, force=True)
    if running:
        ray.wait(running, num_returns=len(running), timeout=10.0)
