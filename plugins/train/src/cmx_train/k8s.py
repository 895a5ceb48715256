"""Kubernetes manifests of a multi-node training run (``cmx train-k8s``): rendered and
validated against the Kubernetes schema (``kubernetes-validate``'s bundled schemas, offline),
not applied.

* a **ConfigMap** holding the hyper-parameters (the run's ``config.json``);
* a **PersistentVolumeClaim** for the data (and the ranks' outputs), ReadWriteMany so every
  node's pod mounts it;
* a headless **Service** (``clusterIP: None``, ``publishNotReadyAddresses``) giving pod 0 the
  stable name ``<job>-0.<service>`` that the c10d rendezvous uses;
* an **Indexed Job**, one pod per node (``completions = parallelism = nodes``), each running
  ``torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d`` on that endpoint, with
  ``nvidia.com/gpu: G`` limits and the GPU product as node selector.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx_core.errors import CmxError, UsageError
from cmx_train.config import TrainConfig

SCHEMA_VERSION = "1.37.0"
RDZV_PORT = 29400
PRODUCT = {"h100": "NVIDIA-H100-80GB-HBM3", "h200": "NVIDIA-H200", "a100": "NVIDIA-A100-SXM4-80GB"}
CONFIG_DIR = "/cmx/config"
DATA_DIR = "/cmx/data"


@dataclass(frozen=True)
class Manifests:
    config_map: dict[str, Any]
    pvc: dict[str, Any]
    service: dict[str, Any]
    job: dict[str, Any]

    def objects(self) -> list[dict[str, Any]]:
        return [self.config_map, self.pvc, self.service, self.job]


def _name(raw: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")[:40].strip("-")
    if not name or not name[0].isalpha():
        raise UsageError(f"train-k8s: name {raw!r} must start with a letter (DNS-1035 label)")
    return name


def render(config: TrainConfig, *, name: str, image: str, accelerator: str = "h100", pvc_size: str = "200Gi",
           storage_class: str | None = None) -> Manifests:
    """The four objects of ``config`` on ``config.nodes`` pods x ``config.nproc`` GPUs."""
    job = _name(name)
    service = f"{job}-rdzv"
    gpus = config.nproc
    config = replace(config, launcher="torchrun")
    def labels() -> dict[str, str]:  # a fresh mapping each time: no YAML anchors in the files
        return {"app.kubernetes.io/name": "cmx-train", "cmx.dev/train": job}

    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{job}-config", "labels": labels()},
                  "data": {"config.json": json.dumps(config.to_json(), indent=2, sort_keys=True)}}
    pvc_spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": pvc_size}}}
    if storage_class:
        pvc_spec["storageClassName"] = storage_class
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"{job}-data", "labels": labels()},
           "spec": pvc_spec}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "labels": labels()},
           "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"job-name": job},
                    "ports": [{"name": "c10d", "port": RDZV_PORT, "targetPort": RDZV_PORT}]}}
    endpoint = f"{job}-0.{service}:{RDZV_PORT}"
    command = ["python", "-m", "torch.distributed.run", f"--nnodes={config.nodes}", f"--nproc-per-node={gpus}",
               "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={job}", "--max-restarts=0",
               "-m", "cmx_train.worker", f"{CONFIG_DIR}/config.json", f"{DATA_DIR}/out"]
    container = {
        "name": "train", "image": image, "command": command,
        "ports": [{"containerPort": RDZV_PORT, "name": "c10d"}],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "data", "mountPath": DATA_DIR}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod: dict[str, Any] = {
        "metadata": {"labels": labels()},
        "spec": {"subdomain": service, "restartPolicy": "Never", "containers": [container],
                 "nodeSelector": {"nvidia.com/gpu.product": PRODUCT.get(accelerator, accelerator)},
                 "volumes": [{"name": "config", "configMap": {"name": f"{job}-config"}},
                             {"name": "data", "persistentVolumeClaim": {"claimName": f"{job}-data"}},
                             {"name": "dshm", "emptyDir": {"medium": "Memory"}}]},
    }
    job_manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job, "labels": labels()},
                    "spec": {"completionMode": "Indexed", "completions": config.nodes,
                             "parallelism": config.nodes, "backoffLimit": 0, "template": pod}}
    return Manifests(config_map, pvc, svc, job_manifest)


def validate(manifests: Manifests) -> None:
    """Every object against the Kubernetes schema (strict: unknown fields refused)."""
    # deferred: kubernetes_validate only when this runs (119 modules)
    import kubernetes_validate  # type: ignore[import-untyped]

    for item in manifests.objects():
        try:
            kubernetes_validate.validate(item, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            raise CmxError(f"train-k8s: the {item['kind']} manifest is invalid at {where or '(top)'}: "
                           f"{exc.message}") from None


def write(manifests: Manifests, directory: Path) -> list[Path]:
    import yaml  # deferred: yaml only when this runs (27 modules)

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for item in manifests.objects():
        path = directory / f"{item['kind'].lower()}.yaml"
        path.write_text(yaml.safe_dump(item, sort_keys=False, width=120), encoding="utf-8")
        paths.append(path)
    return paths
