"""The slurm executor: one sbatch job per run.

``submit`` writes ``job.sh`` and ``task.sh`` (see :mod:`cmx_slurm.script`) into the run's
stage directory and calls ``sbatch --parsable`` with the resources of
:mod:`cmx_slurm.resources`; the job's output and error go to ``slurm-<id>.out`` and
``slurm-<id>.err`` there. ``wait`` is :func:`cmx_slurm.poll.wait_all`; ``cancel`` is
``scancel`` and a bounded wait for the job to leave the queue; ``fetch`` returns the logs
(the far side wrote its run directory straight into this run's ``remote/``).

The run directory must be on a file system the compute nodes share (as on one node, or a
cluster's home or scratch file system): the far side reads the lock there and writes its
result there.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx_core.api import (
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutorSettings,
    FaultClass,
    Fetched,
    JobStatus,
    RemoteExecutor,
    RemoteJob,
    WorkerKill,
    scheduler_retries,
)
from cmx_core.api import plan_resources as asked_by
from cmx_core.errors import UsageError
from cmx_slurm import poll, requeues, script, slurmcli, worker
from cmx_slurm.about import SUMMARY
from cmx_slurm.resources import Resources, plan_resources
from cmx_slurm.settings import SlurmSettings

STAGE_DIR = "remote-stage"
"""The run's stage directory, as the base's ``prepare`` makes it (``<run dir>/remote-stage``)."""

JOB_RECORD = "slurm-job.json"
"""The stage directory's record of what was submitted (kept with the result's logs)."""


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    """Write a job record whole or not at all (a temporary file renamed over it): a resumed
    driver, or anyone watching the run, reads it while a resubmission rewrites it."""
    part = path.with_name(f".{path.name}.tmp")
    part.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(part, path)


@dataclass(frozen=True)
class SlurmJob:
    """A submitted job: its id, where it was staged, how it is polled."""

    job_id: str
    stage: Path
    resources: Resources
    poll_s: float
    poll_max_s: float


def settings_of(settings: ExecutorSettings) -> SlurmSettings:
    if not isinstance(settings, SlurmSettings):
        raise UsageError(f"slurm executor: settings must be SlurmSettings, not {type(settings).__name__}")
    if settings.poll_s <= 0 or settings.poll_max_s < settings.poll_s:
        raise UsageError(f"slurm executor option poll_s={settings.poll_s!r}, poll_max_s={settings.poll_max_s!r}: "
                         "use 0 < poll_s <= poll_max_s")
    return settings


def resources_for(plan: Any, settings: ExecutorSettings) -> Resources:
    """The job's resources for ``plan`` (its recipes' ``resources:``, its nodes' ``requires``)
    and the settings."""
    return plan_resources((dict(node.requires or {}) for node in plan.nodes), settings_of(settings),
                          asked_by(plan.nodes))


class SlurmExecutor(RemoteExecutor[SlurmJob]):
    name = "slurm"
    summary = SUMMARY
    settings = SlurmSettings
    native_retries = frozenset({FaultClass.NODE_LOST, FaultClass.PREEMPTED})  # --requeue (docs/faults.md)
    kills_workers = True  # its node set down (cmx_slurm.worker)

    def run(self, request: ExecutionRequest) -> ExecutionOutcome:
        """The base's run, with each run of the job that Slurm requeued itself recorded as an
        attempt (:mod:`cmx_slurm.requeues`)."""
        return requeues.with_requeues(super().run(request), request, request.run_dir / STAGE_DIR)

    def cmx_command(self, request: ExecutionRequest) -> tuple[str, ...]:
        chosen = settings_of(request.context.settings).cmx
        if chosen is not None:
            argv = tuple(shlex.split(chosen))
            if not argv:
                raise UsageError("slurm executor option cmx='': give the cmx command on the compute nodes")
            return argv
        return (sys.executable, "-m", "cmx_core")

    def check_plan(self, context: ExecutionContext) -> None:
        resources_for(context.plan, context.settings)
        slurmcli.tool("sbatch")

    def describe(self, context: ExecutionContext) -> dict[str, Any]:
        return {**resources_for(context.plan, context.settings).describe(),
                "far side": "cmx run --lock lock.json --allow-drift=remote --executor local --json"}

    def submit(self, job: RemoteJob) -> SlurmJob:
        chosen = settings_of(job.request.context.settings)
        resources = resources_for(job.request.context.plan, chosen)
        stage = job.stage_dir
        script.write(stage / script.TASK, script.task_script(job.command, job.env, stage))
        batch = script.write(stage / script.BATCH, script.batch_script(stage, resources.ntasks))
        options = [f"--job-name=cmx-{job.request.context.plan.root.recipe.name}"[:120], f"--chdir={stage}",
                   f"--output={stage}/slurm-%j.out", f"--error={stage}/slurm-%j.err", *resources.sbatch_args(),
                   *requeue_args(job.request)]
        job_id = slurmcli.sbatch(options, batch)
        record = {"job_id": job_id, "sbatch": ["sbatch", "--parsable", *options, str(batch)],
                  "tasks": resources.ntasks}
        write_record(stage / JOB_RECORD, record)
        return SlurmJob(job_id, stage, resources, chosen.poll_s, chosen.poll_max_s)

    def wait(self, handle: SlurmJob) -> JobStatus:
        watched = poll.Watched(handle.job_id, handle.stage)
        status = poll.wait_all([watched], poll.Backoff(handle.poll_s, handle.poll_max_s))[handle.job_id]
        return with_log_tail(status, handle.stage / f"slurm-{handle.job_id}.err")

    def fetch(self, handle: SlurmJob, job: RemoteJob) -> Fetched:
        return Fetched(logs=logs_of(handle.stage, handle.job_id),
                       system={"number_of_nodes": handle.resources.nodes} if handle.resources.nodes > 1 else {})

    def cancel(self, handle: SlurmJob) -> None:
        slurmcli.scancel(handle.job_id)
        poll.wait_gone([handle.job_id])

    def kill_worker(self, handle: SlurmJob) -> WorkerKill:
        return worker.kill_worker(handle.job_id, handle.stage)


def requeue_args(request: ExecutionRequest) -> list[str]:
    """``--requeue`` when the job's recovery policy retries a lost node or a preemption:
    Slurm then puts the job back in the queue itself (docs/faults.md). Slurm counts no
    requeues per job (``MaxBatchRequeue`` in slurm.conf bounds them cluster-wide).
    Otherwise ``--no-requeue``: Slurm's default (``JobRequeue=1``) requeues a batch job whose
    node failed, a retry the policy did not ask for."""
    return ["--requeue"] if scheduler_retries(request) > 0 else ["--no-requeue"]


def with_log_tail(status: JobStatus, err: Path) -> JobStatus:
    """A job that did not complete says why in its error log's last line: add it."""
    if status.state == "completed" or not err.is_file():
        return status
    lines = [line for line in err.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return replace(status, message=f"{status.message}; {lines[-1].strip()[:300]}") if lines else status


def logs_of(stage: Path, job_id: str) -> tuple[Path, ...]:
    """The job's logs that exist: its output and error, the batch script, the record."""
    names = (f"slurm-{job_id}.out", f"slurm-{job_id}.err", "slurm.out", script.BATCH, JOB_RECORD)
    return tuple(stage / n for n in names if (stage / n).is_file())
