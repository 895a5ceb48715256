"""The ``k8s`` executor: a Kubernetes Job per run, applied and followed with the official
``kubernetes`` client.

It is a :class:`cmx_core.api.RemoteExecutor`: the lock travels in a ConfigMap mounted at
``/cmx/inputs``; the pod runs the far cmx inside :mod:`cmx_k8s.podside`, which frames the
far run directory at the end of the pod log; ``fetch`` reads the log and unpacks it into
``<run dir>/remote``; the Job and ConfigMap are deleted when the run ends or on Ctrl-C.
``cmx plan ... --executor k8s --executor-opt render=DIR`` writes the same manifests (with
the plan's lock) and applies nothing.
"""

from __future__ import annotations

import math
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core.api import (
    CmxError,
    ExecutionContext,
    ExecutionRequest,
    FaultClass,
    Fetched,
    JobStatus,
    RemoteExecutor,
    RemoteJob,
    UsageError,
    WorkerKill,
    job_policy,
    plan_resources,
    scheduler_retries,
    write_lock,
)
from cmx_k8s import disrupt, framing, manifests
from cmx_k8s.gpu import GpuRequest, gpu_request
from cmx_k8s.settings import K8sSettings

if TYPE_CHECKING:
    from cmx_core.api import Plan

LOG_TAIL = 10
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ACCESS_MODES = ("ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany")


@dataclass
class K8sHandle:
    """A created Job and the clients that follow it."""

    name: str
    namespace: str
    batch: Any
    core: Any
    settings: K8sSettings
    files: tuple[Path, ...]
    config_maps: tuple[str, ...] = ()
    """The ConfigMaps to delete with the Job (default: the one named like it)."""


def job_retries(context: ExecutionContext) -> manifests.JobRetries:
    """The run's recovery policy as the Job's ``backoffLimit`` and ``podFailurePolicy``: the
    same for a single run, a sweep's points (``backoffLimitPerIndex``) and what ``render=``
    writes."""
    return manifests.JobRetries(job_policy(context).max, scheduler_retries(context) > 0)


class K8sExecutor(RemoteExecutor[K8sHandle]):
    name = "k8s"
    # backoffLimit + podFailurePolicy (docs/faults.md)
    native_retries = frozenset({FaultClass.NODE_LOST, FaultClass.PREEMPTED})
    kills_workers = True  # its pod evicted (cmx_k8s.disrupt)
    summary = "Run the plan as a Kubernetes Job (GPUs as resource limits, nodeSelector on the GPU product)"
    settings = K8sSettings

    # -- plan time -----------------------------------------------------------------------

    def check_plan(self, context: ExecutionContext) -> None:
        settings = context.settings
        assert isinstance(settings, K8sSettings)
        check_settings(settings)
        with_plan_resources(context.plan, settings)
        image_for(context, settings)

    def describe(self, context: ExecutionContext) -> dict[str, Any]:
        """The image, GPUs and node selector; with ``render=DIR`` the manifests written there."""
        plan, settings = context.plan, context.settings
        assert isinstance(settings, K8sSettings)
        image = image_for(context, settings)
        settings, accelerator = with_plan_resources(plan, settings)
        gpus = gpu_request(plan, context.gpus, settings.gpus, settings.gpu_product, accelerator)
        shown: dict[str, Any] = {"image": image, "namespace": settings.namespace,
                                 "gpus": f"{gpus.count} x {gpus.resource}" if gpus else "none",
                                 "node selector": f"{gpus.label}={gpus.product}" if gpus and gpus.product else "none",
                                 "volumes": [f"{manifests.INPUTS} (ConfigMap: lock.json)",
                                             f"{manifests.CACHE} (PVC {settings.pvc})" if settings.pvc
                                             else f"{manifests.CACHE} (emptyDir)"],
                                 "result": "framed at the end of the pod log (cmx_k8s.podside)"}
        if settings.render:
            shown["rendered"] = [str(p) for p in render_plan(context, settings, image, gpus, Path(settings.render))]
        return shown

    # -- the run -------------------------------------------------------------------------

    def cmx_command(self, request: ExecutionRequest) -> tuple[str, ...]:
        assert isinstance(request.context.settings, K8sSettings)
        return tuple(shlex.split(request.context.settings.cmx))

    def far_paths(self, request: ExecutionRequest, stage_dir: Path, local_output: Path) -> tuple[str, str]:
        return manifests.FAR_LOCK, manifests.FAR_OUTPUT

    def job_env(self, request: ExecutionRequest) -> dict[str, str]:
        return {}  # the pod's environment is the Job's (manifests.job_manifest)

    def submit(self, job: RemoteJob) -> K8sHandle:
        request, context = job.request, job.request.context
        settings = context.settings
        assert isinstance(settings, K8sSettings)
        check_settings(settings)
        settings, accelerator = with_plan_resources(context.plan, settings)
        gpus = gpu_request(context.plan, context.gpus, settings.gpus, settings.gpu_product, accelerator)
        name = manifests.job_name(request.run_id)
        spec = manifests.JobSpec(name, image_for(context, settings), tuple(job.command), gpus, dict(job.env),
                                 job_retries(context))
        built = manifests.run_manifests(spec, (job.stage_dir / "lock.json").read_text(encoding="utf-8"), settings)
        manifests.validate(built)
        files = tuple(manifests.write(built, request.run_dir / "k8s", as_json=True))
        batch, core = clients(settings)
        handle = K8sHandle(name, settings.namespace, batch, core, settings, files)
        apply(handle, built)
        return handle

    def wait(self, handle: K8sHandle) -> JobStatus:
        limit = handle.settings.timeout_s
        deadline = time.monotonic() + limit + 60 if limit else None  # the Job's own deadline, then ours
        while True:
            job = handle.batch.read_namespaced_job_status(handle.name, handle.namespace)
            finished = ended(job.status, job.spec.completions if job.spec else None)
            if finished is not None:
                return finished
            if deadline is not None and time.monotonic() > deadline:
                self.cancel(handle)
                return JobStatus("timeout", None, f"Job {handle.name} still running after {limit} s; deleted")
            time.sleep(handle.settings.poll_s)

    def fetch(self, handle: K8sHandle, job: RemoteJob) -> Fetched:
        """The pod log, and the far run directory unpacked from its frame; then the Job and
        its ConfigMap are deleted."""
        log_path = job.request.run_dir / "pod.log"
        try:
            log = _pod_log(handle)
            log_path.write_text(log, encoding="utf-8")
            frame = framing.read_frame(log, int(handle.settings.max_result_mb * 1e6))
            if frame is not None:
                if frame.error:
                    raise CmxError(f"k8s executor: {frame.error}")
                framing.write_files(frame.files, job.local_output)
        finally:
            delete(handle)
        return Fetched(logs=(log_path, *handle.files))

    def cancel(self, handle: K8sHandle) -> None:
        delete(handle)

    def kill_worker(self, handle: K8sHandle) -> WorkerKill:
        return disrupt.evict_running_pod(handle.core, handle.batch, handle.name, handle.namespace)


def apply(handle: K8sHandle, built: manifests.RunManifests) -> None:
    """Create the PVC (when missing), the ConfigMap and the Job; on failure delete what was
    created and raise a CmxError."""
    try:
        if built.pvc is not None:
            _ensure_pvc(handle.core, built.pvc, handle.namespace)
        for item in built.config_maps:
            handle.core.create_namespaced_config_map(handle.namespace, item)
        if built.service is not None:  # a multi-node run's rendezvous (manifests.node_set)
            handle.core.create_namespaced_service(handle.namespace, built.service)
        handle.batch.create_namespaced_job(handle.namespace, built.job)
    except Exception as exc:  # noqa: BLE001 - the client raises ApiException, urllib3 and OS errors
        delete(handle)
        raise CmxError(f"cannot create the Job in namespace {handle.namespace}: {_reason(exc)}") from None


def with_plan_resources(plan: Plan, settings: K8sSettings) -> tuple[K8sSettings, str | None]:
    """The settings with what they leave unset taken from the plan's ``resources:``
    (``cpus`` -> the cpu limit, ``memory`` -> the memory limit in Mi, ``time`` ->
    activeDeadlineSeconds, ``gpus`` -> the GPU limit), and its accelerator tag. One Job runs
    pod per node (``nodes=``, one by default): a plan asking for more nodes or tasks is refused."""
    asked = plan_resources(plan.nodes)
    if (asked.nodes or 1) > settings.nodes or (asked.tasks_per_node or 1) > 1:
        raise UsageError(f"k8s executor: the plan asks for {asked.nodes or 1} node(s) x {asked.tasks_per_node or 1} "
                         f"task(s) (resources: in recipe {plan.root.recipe_name}), and a Job here runs one pod "
                         f"on each of nodes={settings.nodes}; give nodes=N (its launcher starts the ranks of a node) "
                         "or use --executor slurm")
    return replace(
        settings, cpus=settings.cpus or (str(asked.cpus) if asked.cpus else None),
        memory=settings.memory or (f"{asked.memory_mib}Mi" if asked.memory_mib else None),
        timeout_s=settings.timeout_s or (math.ceil(asked.time_s) if asked.time_s else None),
        gpus=settings.gpus if settings.gpus is not None else asked.gpus), asked.accelerator


def image_for(context: ExecutionContext, settings: K8sSettings) -> str:
    """``image=``, else cmx-docker's content-addressed tag of the context's plan's template
    (computed by the registered ``docker`` executor's own ``describe``, nothing built: reached
    through the context's registry, so cmx-k8s imports no other plugin), with ``image_prefix``
    before it."""
    if settings.image:
        return settings.image

    docker = context.registry.executors.get("docker")
    if docker is None or docker.describe is None:
        raise UsageError("k8s executor: no image= given and no docker executor to compute the image tag; "
                         "install cmx-docker or give image=REPOSITORY:TAG")
    tag = str(docker.describe(replace(context, settings=docker.settings())).get("image", ""))
    if not tag or tag.startswith("("):
        raise UsageError(f"k8s executor: the image tag cannot be computed here {tag}; give image=REPOSITORY:TAG")
    return settings.image_prefix + tag


def render_plan(context: ExecutionContext, settings: K8sSettings, image: str, gpus: GpuRequest | None,
                directory: Path) -> list[Path]:
    """The context's plan's lock and manifests, validated, written into ``directory``."""
    plan = context.plan
    directory.mkdir(parents=True, exist_ok=True)
    write_lock(directory, plan, context.registry)
    lock = (directory / "lock.json").read_text(encoding="utf-8")
    name = manifests.job_name(f"{plan.root.recipe_name}-{plan.root.cache_key[:8]}")
    spec = manifests.JobSpec(name, image, tuple(manifests.far_argv(shlex.split(settings.cmx))), gpus,
                             retries=job_retries(context))
    built = manifests.run_manifests(spec, lock, settings)
    manifests.validate(built)
    return [directory / "lock.json", *manifests.write(built, directory)]


def clients(settings: K8sSettings) -> tuple[Any, Any]:
    """(BatchV1Api, CoreV1Api) for the configured cluster."""
    from kubernetes import client, config  # deferred: kubernetes only when this runs (511 modules)

    try:
        if settings.kubeconfig or not _in_cluster():
            api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=settings.kubeconfig, context=settings.context)
        else:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api = client.ApiClient()
    except (config.ConfigException, OSError, TypeError) as exc:
        raise UsageError(f"no cluster configured ({_reason(exc)}); give kubeconfig=FILE "
                         "(and context=NAME) or set KUBECONFIG") from None
    return client.BatchV1Api(api), client.CoreV1Api(api)


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def check_settings(settings: K8sSettings) -> None:
    if settings.kubeconfig and not Path(settings.kubeconfig).is_file():
        raise UsageError(f"k8s executor option kubeconfig={settings.kubeconfig!r}: no such file; "
                         "give the path of a kubeconfig")
    for key in ("max_result_mb", "poll_s"):
        if getattr(settings, key) <= 0:
            raise UsageError(f"k8s executor option {key}={getattr(settings, key):g}: use a number above 0")
    if settings.nodes < 1:
        raise UsageError(f"k8s executor option nodes={settings.nodes}: use 1 or more")
    if settings.gpus is not None and settings.gpus < 0:
        raise UsageError(f"k8s executor option gpus={settings.gpus}: use 0 or more")
    if settings.pvc_access_mode not in ACCESS_MODES:
        raise UsageError(f"k8s executor option pvc_access_mode={settings.pvc_access_mode!r}: use one of "
                         f"{', '.join(ACCESS_MODES)}")
    if not shlex.split(settings.cmx):
        raise UsageError("k8s executor option cmx='': give how the image starts cmx, e.g. cmx")


def ended(status: Any, completions: int | None = None) -> JobStatus | None:
    """The Job's end from its conditions; without one, from its count of succeeded pods once
    it reaches ``completions`` (a multi-node run's Indexed Job is not done when pod 1 is)."""
    for condition in status.conditions or ():
        if condition.status != "True":
            continue
        if condition.type == "Complete":
            return JobStatus("completed", 0, condition.message or "")
        if condition.type == "Failed":
            if condition.reason == "DeadlineExceeded":
                return JobStatus("timeout", 1, str(condition.message or "DeadlineExceeded"))
            return JobStatus("failed", 1, f"{condition.reason}: {condition.message or ''}".strip(": "))
    if status.succeeded and status.succeeded >= (completions or 1):
        return JobStatus("completed", 0)
    return None


def _pod_log(handle: K8sHandle) -> str:
    pods = handle.core.list_namespaced_pod(handle.namespace, label_selector=f"job-name={handle.name}").items
    if not pods:
        return ""
    first = [p for p in pods if (p.metadata.annotations or {}).get(COMPLETION_INDEX, "0") == "0"] or pods
    newest = max(first, key=lambda p: str(p.metadata.creation_timestamp or ""))  # a multi-node run: node 0's
    return str(handle.core.read_namespaced_pod_log(newest.metadata.name, handle.namespace))


def _ensure_pvc(core: Any, pvc: dict[str, Any], namespace: str) -> None:
    from kubernetes.client.exceptions import ApiException  # deferred: kubernetes only when this runs (511 modules)

    try:
        core.read_namespaced_persistent_volume_claim(pvc["metadata"]["name"], namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespaced_persistent_volume_claim(namespace, pvc)


def delete(handle: K8sHandle) -> None:
    """Delete the Job (its pods with it) and its ConfigMaps; a missing one is fine."""
    from kubernetes.client.exceptions import ApiException  # deferred: kubernetes only when this runs (511 modules)

    def config_map(name: str) -> Callable[[], Any]:
        return lambda: handle.core.delete_namespaced_config_map(name, handle.namespace)

    calls: tuple[Callable[[], Any], ...] = (lambda: handle.batch.delete_namespaced_job(handle.name, handle.namespace,
                                                             propagation_policy="Background"),
                                             *(config_map(n) for n in handle.config_maps or (handle.name,)))
    if handle.settings.nodes > 1:  # the multi-node run's headless Service (manifests.node_set)
        calls += (lambda: handle.core.delete_namespaced_service(f"{handle.name}-nodes", handle.namespace),)
    for call in calls:
        try:
            call()
        except ApiException as exc:
            if exc.status != 404:
                raise CmxError(f"k8s executor: cannot delete {handle.name}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", "") or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
