"""The manifests of a run: a ConfigMap with the inputs (the lock file), a PVC for datasets,
models and the cmx cache, and a Job (an Indexed Job for a sweep, each index taking its
point's lock from the ConfigMap). Plain dicts, validated client-side against the Kubernetes
schema (``kubernetes-validate``'s bundled schemas work offline).

The one builder of every suite's manifests: a multi-node run (``nodes=N``: a training run
whose launcher is ``torchrun``, say) is an Indexed Job of N pods, one per node, behind a
headless Service that gives pod 0 the stable name ``<job>-0.<service>``; each pod is told
its place (:data:`NODE_RANK_ENV`, ``MASTER_ADDR``, ``MASTER_PORT``), from which the step's
launcher builds what the node runs. No suite renders Kubernetes objects of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from cmx_core.api import CmxError, UsageError
from cmx_k8s import schema
from cmx_k8s.framing import wrapper_source
from cmx_k8s.gpu import GpuRequest
from cmx_k8s.settings import K8sSettings

INPUTS = "/cmx/inputs"
WORK = "/cmx/work"
CACHE = "/cmx/cache"
FAR_LOCK = f"{INPUTS}/lock.json"
FAR_OUTPUT = f"{WORK}/remote"
SCHEMA_VERSION = "1.37.0"
RUN_LABEL = "cmx.dev/run"
INDEX_ENV = "CMX_POINT_INDEX"
NODE_RANK_ENV = "CMX_NODE_RANK"
"""The node rank of a multi-node run's pod (its Job completion index)."""


CONFIG_MAP_DATA_LIMIT = 1024 * 1024
"""The most data a ConfigMap may hold (Kubernetes refuses more: 1 MiB)."""
OBJECT_LIMIT = 1536 * 1024
"""The largest object etcd stores by default (``--max-request-bytes``, 1.5 MiB)."""
APPLY_LIMIT = 256 * 1024
"""The largest object a client-side ``kubectl apply`` takes: it copies the whole object, as
JSON, into its ``last-applied-configuration`` annotation, and annotations hold 256 KiB."""
CONFIG_MAP_FILL = 240 * 1024
"""How full cmx packs a sweep's ConfigMaps, counted as the JSON that annotation holds (a
lock's quotes escaped): below :data:`APPLY_LIMIT`, which the keys and metadata count
towards too."""
DEFAULT_CPU = "1"
DEFAULT_MEMORY = "1Gi"
"""The requests and limits of a pod whose recipe and settings give no ``cpus``/``memory``:
never none, which would put the pod in the BestEffort class, first to be evicted."""


@dataclass(frozen=True)
class RunManifests:
    """The objects of one run, in the order they are applied; a sweep's locks may need more
    than one ConfigMap (``more_config_maps``), projected into one ``/cmx/inputs`` volume."""

    config_map: dict[str, Any]
    pvc: dict[str, Any] | None
    job: dict[str, Any]
    more_config_maps: tuple[dict[str, Any], ...] = ()
    service: dict[str, Any] | None = None
    """The headless Service of a multi-node run's rendezvous (None for one pod)."""

    @property
    def config_maps(self) -> tuple[dict[str, Any], ...]:
        return (self.config_map, *self.more_config_maps)

    def objects(self) -> list[dict[str, Any]]:
        return [m for m in (self.pvc, *self.config_maps, self.service, self.job) if m is not None]


def job_name(seed: str) -> str:
    """A DNS-1123 name (at most 63 characters) from ``seed``."""
    name = re.sub(r"[^a-z0-9-]+", "-", f"cmx-{seed}".lower()).strip("-")
    return name[:52].rstrip("-") or "cmx"


def far_argv(cmx: Sequence[str], lock: str = FAR_LOCK, output: str = FAR_OUTPUT) -> list[str]:
    """The far command (the same RemoteExecutor.prepare builds for a run)."""
    return [*cmx, "run", "--lock", lock, "--allow-drift=remote", "--executor", "local", "--output", output, "--json"]


def container_command(settings: K8sSettings, command: Sequence[str]) -> list[str]:
    """The image's Python running :mod:`cmx_k8s.podside` around ``command``."""
    return [settings.python, "-c", wrapper_source(), str(int(settings.max_result_mb * 1e6)), FAR_OUTPUT,
            *command]


def pvc_manifest(settings: K8sSettings) -> dict[str, Any] | None:
    if not settings.pvc:
        return None
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": settings.pvc, "namespace": settings.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "cmx"}},
            "spec": {"accessModes": [settings.pvc_access_mode],
                     "resources": {"requests": {"storage": settings.pvc_size}}}}


def config_map(name: str, settings: K8sSettings, data: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": settings.namespace, "labels": {RUN_LABEL: name}},
            "data": dict(data)}


@dataclass(frozen=True)
class JobRetries:
    """A run's recovery policy as a Job's (docs/faults.md): ``limit`` the pod failures the
    Job retries (``backoffLimit``, at least the ``backoff_limit`` setting);
    ``ignore_disruptions``: a pod lost to a node drain, a preemption or an eviction (the
    ``DisruptionTarget`` condition) is replaced without counting against it."""

    limit: int = 0
    ignore_disruptions: bool = False


def pod_failure_policy(retries: JobRetries, indexed: bool) -> dict[str, Any]:
    """Exit code 2 (bad input) fails the Job (an Indexed Job's index) at once, never retried;
    disruptions are ignored when the policy retries lost nodes or preemptions. Every Job
    carries it, a run without retries too (the rule on exit code 2 costs nothing there)."""
    rules: list[dict[str, Any]] = [{"action": "FailIndex" if indexed else "FailJob",
                                    "onExitCodes": {"containerName": "cmx", "operator": "In", "values": [2]}}]
    if retries.ignore_disruptions:
        rules.append({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    return {"rules": rules}


@dataclass(frozen=True)
class JobSpec:
    """What a Job runs: its ``name``, the ``image``, the ``command`` in the container (the
    far cmx, already inside :func:`container_command`), the ``gpus`` each pod asks for, the
    variables added to its environment and its recovery policy."""

    name: str
    image: str
    command: tuple[str, ...]
    gpus: GpuRequest | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    retries: JobRetries | None = None


@dataclass(frozen=True)
class Indexed:
    """An Indexed Job of ``completions`` pods, at most ``parallelism`` at once (default:
    all), each told its index in ``index_env``; ``inputs``: the ConfigMaps projected into
    ``/cmx/inputs`` (default: the one named like the Job)."""

    completions: int
    parallelism: int | None = None
    inputs: tuple[str, ...] = ()
    index_env: str = INDEX_ENV


def job_manifest(job: JobSpec, settings: K8sSettings, indexed: Indexed | None = None) -> dict[str, Any]:
    """The Job; ``indexed``: an Indexed Job whose index is ``$CMX_POINT_INDEX`` (or the
    node rank), each index failing on its own (``backoffLimitPerIndex``, the retries of
    ``backoff_limit``; no Job-wide backoffLimit, which would end every index at the first
    failure). CPU and memory are always requested and limited (:data:`DEFAULT_CPU`,
    :data:`DEFAULT_MEMORY` when nothing asks)."""
    name, image, command, gpus, env, retries = job.name, job.image, job.command, job.gpus, job.env, job.retries
    completions = indexed.completions if indexed is not None else None
    parallelism = indexed.parallelism if indexed is not None else None
    inputs = indexed.inputs if indexed is not None else ()
    resources: dict[str, dict[str, Any]] = {"limits": {}, "requests": {}}
    for key, value in (("cpu", settings.cpus or DEFAULT_CPU), ("memory", settings.memory or DEFAULT_MEMORY)):
        resources["limits"][key] = resources["requests"][key] = value
    sources = list(inputs) or [name]
    volume = {"configMap": {"name": name}} if sources == [name] else \
        {"projected": {"sources": [{"configMap": {"name": n}} for n in sources]}}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [], "volumes": [
        {"name": "inputs", **volume},
        {"name": "work", "emptyDir": {}},
        {"name": "cache", **({"persistentVolumeClaim": {"claimName": settings.pvc}} if settings.pvc
                             else {"emptyDir": {}})}]}
    mounts = [{"name": "inputs", "mountPath": INPUTS, "readOnly": True}, {"name": "work", "mountPath": WORK},
              {"name": "cache", "mountPath": CACHE}]
    if gpus is not None:
        resources["limits"][gpus.resource] = gpus.count
        if gpus.product:
            pod["nodeSelector"] = {gpus.label: gpus.product}
        pod["tolerations"] = [{"key": gpus.resource, "operator": "Exists", "effect": "NoSchedule"}]
        pod["volumes"].append({"name": "shm", "emptyDir": {"medium": "Memory"}})
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
    variables: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in {
        "CMX_CACHE_DIR": f"{CACHE}/cmx", "CMX_DATA_DIR": f"{WORK}/data", "HOME": WORK, "PYTHONUNBUFFERED": "1",
        **env}.items()]
    if indexed is not None:
        variables.append({"name": indexed.index_env, "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}})
    container: dict[str, Any] = {"name": "cmx", "image": image, "command": list(command), "env": variables,
                                 "volumeMounts": mounts, "resources": {k: v for k, v in resources.items() if v}}
    pod["containers"].append(container)
    template: dict[str, Any] = {"metadata": {"labels": {RUN_LABEL: name}}, "spec": pod}
    if settings.metrics_port is not None:
        _expose_metrics(settings.metrics_port, template, container)
    retries = retries or JobRetries()
    limit = max(settings.backoff_limit, retries.limit)
    spec: dict[str, Any] = {"backoffLimit": limit, "template": template,
                            "podFailurePolicy": pod_failure_policy(retries, completions is not None)}
    if settings.timeout_s:
        spec["activeDeadlineSeconds"] = settings.timeout_s
    if completions is not None:
        del spec["backoffLimit"]
        spec.update(completionMode="Indexed", completions=completions,
                    parallelism=min(parallelism or completions, completions),
                    backoffLimitPerIndex=limit)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": settings.namespace,
                         "labels": {RUN_LABEL: name, "app.kubernetes.io/managed-by": "cmx"}},
            "spec": spec}


def _expose_metrics(port: int, template: dict[str, Any], container: dict[str, Any]) -> None:
    """The far run serves its telemetry on the pod's address (``CMX_METRICS_ADDR``; the pod's
    network is its own) and the pod carries the ``prometheus.io`` annotations Prometheus'
    Kubernetes service discovery scrapes by (docs/telemetry.md)."""
    template["metadata"]["annotations"] = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                                           "prometheus.io/path": "/metrics"}
    container["env"] += [{"name": "CMX_METRICS_PORT", "value": str(port)},
                         {"name": "CMX_METRICS_ADDR", "value": "0.0.0.0"}]
    container["ports"] = [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]


def run_manifests(spec: JobSpec, lock: str, settings: K8sSettings) -> RunManifests:
    """The objects of one run of ``lock``: ``spec.command`` is the far command; with the
    ``nodes`` setting above 1, one pod per node and their headless Service (:func:`node_set`)."""
    wrapped = replace(spec, command=tuple(container_command(settings, spec.command)))
    maps = config_map(spec.name, settings, {"lock.json": lock})
    if settings.nodes <= 1:
        return RunManifests(maps, pvc_manifest(settings), job_manifest(wrapped, settings))
    service, job = node_set(wrapped, settings)
    return RunManifests(maps, pvc_manifest(settings), job, service=service)


def node_set(spec: JobSpec, settings: K8sSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """A multi-node run: the headless Service (``clusterIP: None``, ready or not) and an
    Indexed Job of ``nodes`` pods that all run at once, pod ``i`` told it is node ``i``
    (:data:`NODE_RANK_ENV`) and where node 0 is (``MASTER_ADDR=<job>-0.<service>``, the
    name an Indexed Job's pod 0 has under the Service's subdomain; ``MASTER_PORT``)."""
    service = f"{spec.name}-nodes"
    place = {"MASTER_ADDR": f"{spec.name}-0.{service}", "MASTER_PORT": str(settings.master_port),
             "CMX_NNODES": str(settings.nodes), "CMX_JOB_ID": spec.name}
    job = job_manifest(replace(spec, env={**place, **spec.env}), settings,
                       Indexed(settings.nodes, settings.nodes, index_env=NODE_RANK_ENV))
    job["spec"]["template"]["spec"]["subdomain"] = service
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": service, "namespace": settings.namespace, "labels": {RUN_LABEL: spec.name}},
           "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"job-name": spec.name}}}
    return svc, job


SWEEP_LOCK = f"{INPUTS}/lock-$({INDEX_ENV}).json"


def sweep_command(cmx: Sequence[str]) -> tuple[str, ...]:
    """The far command of a sweep's index: :func:`far_argv` with :data:`SWEEP_LOCK`."""
    return tuple(far_argv(cmx, lock=SWEEP_LOCK))


def sweep_manifests(spec: JobSpec, locks: Sequence[str], settings: K8sSettings,
                    parallelism: int | None = None) -> RunManifests:
    """An Indexed Job over ``locks``: index i runs ``lock-i.json`` (Kubernetes expands
    ``$(CMX_POINT_INDEX)`` in the command; no shell is involved). ``spec.command`` is the far
    command with :data:`SWEEP_LOCK` as its lock (:func:`sweep_command`)."""
    chunks = pack_locks(locks)
    names = [spec.name] if len(chunks) == 1 else [f"{spec.name}-{k}" for k in range(len(chunks))]
    maps = [config_map(n, settings, chunk) for n, chunk in zip(names, chunks, strict=True)]
    job = job_manifest(replace(spec, command=tuple(container_command(settings, spec.command))), settings,
                       Indexed(len(locks), parallelism, tuple(names)))
    return RunManifests(maps[0], pvc_manifest(settings), job, tuple(maps[1:]))


def pack_locks(locks: Sequence[str]) -> list[dict[str, str]]:
    """The points' locks as ``lock-<i>.json`` keys, packed in order into as many ConfigMaps'
    data as they need (each below :data:`CONFIG_MAP_FILL` by :func:`applied_size`, so that
    each ConfigMap stays under :data:`APPLY_LIMIT`); a lock too large for any ConfigMap is a
    one-line UsageError naming the point."""
    chunks: list[dict[str, str]] = [{}]
    filled = 0
    for index, text in enumerate(locks):
        key = f"lock-{index}.json"
        size = applied_size({key: text})
        if size > CONFIG_MAP_FILL:
            raise UsageError(f"k8s executor: point {index}'s lock is {size} bytes, more than a ConfigMap holds "
                             f"({CONFIG_MAP_FILL} bytes as JSON, under the {APPLY_LIMIT} a kubectl apply takes); "
                             "make that point's inputs smaller (pass large data as a file on the PVC instead)")
        if filled + size > CONFIG_MAP_FILL and chunks[-1]:
            chunks.append({})
            filled = 0
        chunks[-1][key] = text
        filled += size
    return chunks


def check_sizes(manifests: RunManifests) -> None:
    """Every object within the API server's limits (a ConfigMap's data within 1 MiB, any
    object within etcd's 1.5 MiB) and within what a client-side ``kubectl apply`` takes
    (:data:`APPLY_LIMIT`); a one-line UsageError naming the object otherwise."""
    for item in manifests.objects():
        size = len(json.dumps(item, separators=(",", ":")).encode("utf-8"))
        what = f"{item['kind']} {item['metadata']['name']}"
        if item["kind"] == "ConfigMap":
            data = sum(len(k) + len(str(v).encode("utf-8")) for k, v in item.get("data", {}).items())
            if data > CONFIG_MAP_DATA_LIMIT:
                raise UsageError(f"k8s executor: the {what} holds {data} bytes, over the "
                                 f"{CONFIG_MAP_DATA_LIMIT}-byte ConfigMap limit; make the inputs smaller")
        if size > OBJECT_LIMIT:
            raise UsageError(f"k8s executor: the {what} manifest is {size} bytes, over the {OBJECT_LIMIT}-byte "
                             "object limit; make the inputs smaller or split the sweep")
        if (applied := applied_size(item)) >= APPLY_LIMIT:
            raise UsageError(f"k8s executor: the {what} manifest is {applied} bytes as kubectl apply records it, "
                             f"not under its {APPLY_LIMIT}-byte limit; make the inputs smaller (pass large data "
                             "as a file on the PVC instead)")


def applied_size(item: Mapping[str, Any]) -> int:
    """The bytes of ``item`` as a client-side ``kubectl apply`` writes it into its annotation:
    compact JSON, with ``<``, ``>`` and ``&`` escaped as Go's encoder does (six bytes each)."""
    text = json.dumps(item, separators=(",", ":"))
    return len(text.encode("utf-8")) + 5 * sum(text.count(c) for c in "<>&")


def validate(manifests: RunManifests) -> None:
    """Each object within its size limit (:func:`check_sizes`) and valid against the
    Kubernetes schema; a CmxError naming the object and path."""
    import jsonschema  # deferred: jsonschema only when this runs

    check_sizes(manifests)
    for item in manifests.objects():
        try:
            schema.check(item, SCHEMA_VERSION)
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            raise CmxError(f"k8s executor: the {item['kind']} manifest is invalid at {where or '(top)'}: "
                           f"{exc.message}") from None


def write(manifests: RunManifests, directory: Path, as_json: bool = False) -> list[Path]:
    """One file per object in ``directory``: YAML (``render=``), or JSON in a run directory
    (kept with the result; not ``.yaml``, which a recipe directory above it would read)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for item in manifests.objects():
        stem = item["kind"].lower()
        if item["kind"] == "ConfigMap" and manifests.more_config_maps:
            stem = f"configmap-{manifests.config_maps.index(item)}"
        path = directory / f"{stem}.{'json' if as_json else 'yaml'}"
        path.write_text(json.dumps(item, indent=2) if as_json else _yaml(item), encoding="utf-8")
        written.append(path)
    return written


def _yaml(item: Mapping[str, Any]) -> str:
    """``item`` as block YAML, by libyaml's emitter where PyYAML has it (the pure-Python one
    took 25 ms an object)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(item, Dumper=dumper, sort_keys=False, width=120)
    return text
