"""Many runs as Kubernetes Indexed Jobs: the k8s executor's batch entries
(``Executor.run_many`` and ``run_each``), which ``cmx sweep --executor k8s -j N`` calls.

Every request is prepared as a single run is (its stage directory and ``lock.json``); the
points are grouped by shape (:func:`shapes`: a pod template asks for one set of resources),
and each group is one Indexed Job (``completions: N``, ``parallelism: min(N, -j)``,
``backoffLimitPerIndex`` so that a failed point does not end the others) whose index *i*
runs lock *i*, the locks packed into as many ConfigMaps as they need
(:func:`cmx_k8s.manifests.pack_locks`). As each index ends (the Job status's
``completedIndexes``/``failedIndexes``), its pod log (pods by ``job-name``, index by the
``batch.kubernetes.io/job-completion-index`` annotation) is unpacked into that point's
``<run dir>/remote`` as :meth:`K8sExecutor.fetch` does, folded into its outcome and handed
over (the sweep records it then). The Jobs and ConfigMaps are deleted at the end and on
Ctrl-C. :func:`render_many` writes the same manifests and applies nothing.
"""

from __future__ import annotations

import json
import math
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx_core.api import (
    CmxError,
    ExecutionContext,
    ExecutionOutcome,
    ExecutionRequest,
    Fetched,
    JobStatus,
    RemoteJob,
    fold,
)
from cmx_core.errors import Interrupted, UsageError
from cmx_k8s import framing, manifests
from cmx_k8s.executor import (
    LOG_TAIL,
    K8sExecutor,
    K8sHandle,
    apply,
    check_settings,
    clients,
    delete,
    ended,
    image_for,
    job_retries,
    render_plan,
    with_plan_resources,
)
from cmx_k8s.gpu import GpuRequest, gpu_request
from cmx_k8s.settings import K8sSettings


@dataclass(frozen=True)
class SweepJob:
    """The applied Indexed Job and, in index order, each point's prepared job."""

    handle: K8sHandle
    jobs: tuple[RemoteJob, ...]
    submitted: float


@dataclass(frozen=True)
class Shape:
    """The points (by index) that one Indexed Job runs: a pod template is one shape, so
    points asking for different CPUs, memory, time, GPUs, image or recovery policy (its
    ``backoffLimitPerIndex`` and ``podFailurePolicy``, as a single run's Job has them) get a
    Job each."""

    settings: K8sSettings
    gpus: GpuRequest | None
    image: str
    indices: tuple[int, ...]
    retries: manifests.JobRetries = field(default_factory=manifests.JobRetries)


def shapes(contexts: Sequence[ExecutionContext], settings: K8sSettings) -> list[Shape]:
    """The points (each one's context: its plan, and the facts and registry it was made with)
    grouped by what their pod asks for (each point's own ``resources:``), in order of their
    first point."""
    if settings.nodes > 1:
        raise UsageError(f"k8s executor option nodes={settings.nodes}: a sweep runs each point as one pod of an "
                         "Indexed Job; run a multi-node point on its own with cmx run")
    groups: dict[tuple[Any, ...], list[int]] = {}
    found: dict[tuple[Any, ...], tuple[K8sSettings, GpuRequest | None, str, manifests.JobRetries]] = {}
    for index, context in enumerate(contexts):
        point, accelerator = with_plan_resources(context.plan, settings)  # each point's plan must fit one pod
        gpus = gpu_request(context.plan, context.gpus, point.gpus, point.gpu_product, accelerator)
        image = image_for(context, settings)
        retries = job_retries(context)
        key = (point.cpus, point.memory, point.timeout_s, gpus, image, retries)
        groups.setdefault(key, []).append(index)
        found.setdefault(key, (point, gpus, image, retries))
    return [Shape(found[key][0], found[key][1], found[key][2], tuple(indices), found[key][3])
            for key, indices in groups.items()]


def run_many(requests: Sequence[ExecutionRequest], jobs: int) -> tuple[ExecutionOutcome, ...]:
    """Run ``requests`` as one Indexed Job per shape (:func:`shapes`), at most ``jobs`` pods
    of each at once; one outcome per request, in order. Ctrl-C deletes the Jobs and raises
    Interrupted."""
    outcomes: dict[int, ExecutionOutcome] = {}
    run_each(requests, jobs, outcomes.__setitem__)
    return tuple(outcomes[i] for i in range(len(requests)))


def run_each(requests: Sequence[ExecutionRequest], jobs: int,
             on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    """:func:`run_many` handing each point's outcome (with its request's index) to
    ``on_outcome`` as soon as its index has ended (the Job status's ``completedIndexes`` and
    ``failedIndexes``): the batch entry a sweep uses, recording each point then."""
    if not requests:
        raise UsageError("k8s run_many: give at least one run")
    settings = requests[0].context.settings
    assert isinstance(settings, K8sSettings)
    check_settings(settings)
    groups = shapes([r.context for r in requests], settings)
    sweeps: list[SweepJob] = []
    try:
        for group in groups:
            sweeps.append(submit([requests[i] for i in group.indices], jobs, group))
        for group, sweep in zip(groups, sweeps, strict=True):
            follow(sweep, _renumbered(group.indices, on_outcome))
    except (KeyboardInterrupt, Interrupted):
        _delete_all(sweeps)
        names = ", ".join(s.handle.name for s in sweeps)
        what = f"Indexed Job {names} was" if len(sweeps) == 1 else f"Indexed Jobs {names} were"
        raise Interrupted(f"interrupted; the k8s {what} deleted") from None
    finally:
        _delete_all(sweeps)


def _renumbered(indices: Sequence[int], on_outcome: Callable[[int, ExecutionOutcome], None]
                ) -> Callable[[int, ExecutionOutcome], None]:
    """``on_outcome`` for one Job: its completion index turned back into the request's."""
    return lambda index, outcome: on_outcome(indices[index], outcome)


def _delete_all(sweeps: Sequence[SweepJob]) -> None:
    for sweep in sweeps:
        delete(sweep.handle)


def submit(requests: Sequence[ExecutionRequest], jobs: int, shape: Shape | None = None) -> SweepJob:
    """Prepare every request, build and validate the ConfigMaps, PVC and Indexed Job of one
    shape (default: the first request's, which every request must fit), apply them."""
    if not requests:
        raise UsageError("k8s run_many: give at least one run")
    first = requests[0]
    if shape is None:
        assert isinstance(first.context.settings, K8sSettings)
        [shape] = shapes([first.context], first.context.settings)
    settings = shape.settings
    executor = K8sExecutor()
    prepared = tuple(executor.prepare(r) for r in requests)
    parallelism = max(1, min(jobs, len(prepared)))
    if settings.timeout_s:  # the Job's deadline covers every wave of points
        settings = _with_timeout(settings, settings.timeout_s * math.ceil(len(prepared) / parallelism))
    name = manifests.job_name(f"sweep-{first.run_id}")
    built = manifests.sweep_manifests(
        manifests.JobSpec(name, shape.image, tuple(indexed_command(prepared)), shape.gpus, prepared[0].env,
                          shape.retries),
        [(j.stage_dir / "lock.json").read_text(encoding="utf-8") for j in prepared], settings, parallelism)
    manifests.validate(built)
    for job in prepared:
        _write_job(built.job, job.request.run_dir / "k8s")
    batch, core = clients(settings)
    handle = K8sHandle(name, settings.namespace, batch, core, settings, (),
                       tuple(str(c["metadata"]["name"]) for c in built.config_maps))
    submitted = time.time()
    apply(handle, built)
    return SweepJob(handle, prepared, submitted)


def render_many(contexts: Sequence[ExecutionContext], jobs: int) -> list[Path]:
    """``cmx sweep ... --executor-opt render=DIR``: each point's own manifests (what ``cmx
    plan`` renders for it) in ``DIR/point-<i>/``, and what the sweep would apply, its
    Indexed Job(s) and ConfigMaps, in ``DIR/sweep-<k>/`` (one per shape), all validated;
    nothing is applied. Every point's context has the sweep's settings."""
    if not contexts:
        return []
    settings = contexts[0].settings
    assert isinstance(settings, K8sSettings) and settings.render
    check_settings(settings)
    root = Path(settings.render)
    written: list[Path] = []
    groups = shapes(contexts, settings)
    plans = [context.plan for context in contexts]
    for group in groups:
        for index in group.indices:
            written += render_plan(contexts[index], group.settings, group.image, group.gpus, root / f"point-{index}")
    cmx = shlex.split(settings.cmx)
    for number, group in enumerate(groups):
        locks = [(root / f"point-{i}" / "lock.json").read_text(encoding="utf-8") for i in group.indices]
        parallelism = max(1, min(jobs, len(locks)))
        shaped = group.settings if not group.settings.timeout_s else \
            _with_timeout(group.settings, group.settings.timeout_s * math.ceil(len(locks) / parallelism))
        spec = manifests.JobSpec(manifests.job_name(f"sweep-{plans[group.indices[0]].root.cache_key[:8]}-{number}"),
                                 group.image, manifests.sweep_command(cmx), group.gpus, retries=group.retries)
        built = manifests.sweep_manifests(spec, locks, shaped, parallelism)
        manifests.validate(built)
        directory = root / f"sweep-{number}"
        written += manifests.write(built, directory)
        (directory / "points.json").write_text(json.dumps({"points": list(group.indices)}) + "\n", encoding="utf-8")
        written.append(directory / "points.json")
    return written


def indexed_command(jobs: Sequence[RemoteJob]) -> list[str]:
    """The far command every index runs: each point's own with its lock replaced by
    ``lock-$(CMX_POINT_INDEX).json`` (any other ``$`` escaped as ``$$``, which Kubernetes
    turns back into one). The points must agree on the rest."""
    commands = {tuple(_indexed(job.command)) for job in jobs}
    if len(commands) != 1:
        raise CmxError("k8s executor: the sweep's points need different far commands; one Indexed Job runs one")
    return list(commands.pop())


def follow(sweep: SweepJob, on_outcome: Callable[[int, ExecutionOutcome], None]) -> None:
    """Poll the Job every ``poll_s``: each index that has ended (``completedIndexes``,
    ``failedIndexes``) is collected and handed to ``on_outcome`` at once; when the Job has
    ended (or its deadline passed: then it is deleted), every index left is."""
    handle = sweep.handle
    limit = handle.settings.timeout_s
    deadline = time.monotonic() + limit + 60 if limit else None
    handed: set[int] = set()

    def hand(indices: Sequence[int], job_status: JobStatus) -> None:
        pods = _pods_by_index(handle)
        for index in indices:
            handed.add(index)
            on_outcome(index, _collect_one(sweep, index, pods.get(index), job_status))

    while True:
        status = handle.batch.read_namespaced_job_status(handle.name, handle.namespace).status
        ended_now = (_indexes(status.completed_indexes) | _indexes(status.failed_indexes)) - handed
        hand(sorted(i for i in ended_now if i < len(sweep.jobs)), JobStatus("failed", None, ""))
        finished = ended(status) if _conditions_final(status) else None
        if finished is None and deadline is not None and time.monotonic() > deadline:
            delete(handle)
            finished = JobStatus("timeout", None, f"Job {handle.name} still running after {limit} s; deleted")
        if finished is not None:
            hand([i for i in range(len(sweep.jobs)) if i not in handed], finished)
            return
        time.sleep(handle.settings.poll_s)


def _collect_one(sweep: SweepJob, index: int, pod: Any, job_status: JobStatus) -> ExecutionOutcome:
    """One index's pod log unpacked into its point's output and folded into its outcome."""
    handle = sweep.handle
    job = sweep.jobs[index]
    log_path = job.request.run_dir / "pod.log"
    log = str(handle.core.read_namespaced_pod_log(pod.metadata.name, handle.namespace)) if pod else ""
    log_path.write_text(log, encoding="utf-8")
    status = _point_status(log, job, handle.settings, pod, job_status)
    fetched = Fetched(logs=(log_path, *_files(job)))
    return fold(job, status, fetched, sweep.submitted, "k8s", own_timing=True)


def _indexes(ranges: str | None) -> set[int]:
    """``"0-2,5"`` (a Job status's index ranges) as ``{0, 1, 2, 5}``."""
    found: set[int] = set()
    for part in (ranges or "").split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            found.update(range(int(first), int(last or first) + 1))
    return found


def _point_status(log: str, job: RemoteJob, settings: K8sSettings, pod: Any, job_status: JobStatus) -> JobStatus:
    """How point ``job`` ended: its frame's exit code (the frame unpacked), else why not,
    with the log's last lines."""
    try:
        frame = framing.read_frame(log, int(settings.max_result_mb * 1e6))
    except CmxError as exc:
        return JobStatus("failed", 1, str(exc))
    if frame is not None and not frame.error:
        framing.write_files(frame.files, job.local_output)
        return JobStatus("completed" if frame.exit_code == 0 else "failed", frame.exit_code)
    if frame is not None:
        return JobStatus("failed", frame.exit_code, f"k8s executor: {frame.error}")
    if pod is None:
        if job_status.state == "timeout":
            return job_status
        why = job_status.message or job_status.state
        return JobStatus("lost", None, f"no pod ran this index; the Job ended: {why}")
    tail = " | ".join([line.strip() for line in log.splitlines() if line.strip()][-LOG_TAIL:]) or "the pod wrote no log"
    if job_status.state == "timeout":
        return JobStatus("timeout", _exit_code(pod), tail)
    return JobStatus("failed", _exit_code(pod), tail)


def _pods_by_index(handle: K8sHandle) -> dict[int, Any]:
    """The newest pod of each completion index."""
    pods = handle.core.list_namespaced_pod(handle.namespace, label_selector=f"job-name={handle.name}").items
    newest: dict[int, Any] = {}
    for pod in sorted(pods, key=lambda p: str(p.metadata.creation_timestamp or "")):
        index = (pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index")
        if index is not None and str(index).isdigit():
            newest[int(index)] = pod
    return newest


def _exit_code(pod: Any) -> int | None:
    for container in getattr(pod.status, "container_statuses", None) or ():
        terminated = getattr(container.state, "terminated", None)
        if terminated is not None:
            return int(terminated.exit_code)
    return None


def _conditions_final(status: Any) -> bool:
    """A Complete or Failed condition (not yet FailureTarget or SuccessCriteriaMet)."""
    return any(c.status == "True" and c.type in ("Complete", "Failed") for c in status.conditions or ())


def _indexed(command: Sequence[str]) -> list[str]:
    return [manifests.SWEEP_LOCK if arg == manifests.FAR_LOCK else arg.replace("$", "$$") for arg in command]


def _with_timeout(settings: K8sSettings, seconds: int) -> K8sSettings:
    return replace(settings, timeout_s=seconds)


def _write_job(job: dict[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "job.json"
    path.write_text(json.dumps(job, indent=2), encoding="utf-8")
    return path


def _files(job: RemoteJob) -> tuple[Path, ...]:
    path = job.request.run_dir / "k8s" / "job.json"
    return (path,) if path.is_file() else ()
