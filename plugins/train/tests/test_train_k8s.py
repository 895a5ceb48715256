"""``cmx train-k8s`` renders the manifests of a 2-node x 8-GPU ResNet-50 run and validates
them against the Kubernetes schema: the GPU limits, the data PVC, the hyper-parameters in
the ConfigMap and the headless Service of the c10d rendezvous; a broken object is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx_core.errors import CmxError
from cmx_train.config import parse
from cmx_train.k8s import render, validate


def test_two_nodes_by_eight_gpus_resnet50(cli: Any, as_json: Any, tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    proc = cli("train-k8s", "--out", str(out), "--model", "resnet50", "--nodes", "2", "--nproc", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    assert as_json(proc)["kinds"] == ["ConfigMap", "PersistentVolumeClaim", "Service", "Job"]
    objects = {p.stem: yaml.safe_load(p.read_text()) for p in out.glob("*.yaml")}
    job, svc, cm, pvc = objects["job"], objects["service"], objects["configmap"], objects["persistentvolumeclaim"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    assert job["spec"]["parallelism"] == 2
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    assert f"--rdzv-endpoint=cmx-train-0.{svc['metadata']['name']}:29400" in container["command"]
    assert "--nnodes=2" in container["command"] and "--nproc-per-node=8" in container["command"]
    hyper = json.loads(cm["data"]["config.json"])
    assert hyper["model"] == "resnet50" and hyper["nodes"] == 2 and hyper["nproc"] == 8
    assert hyper["backend"] == "nccl" and hyper["device"] == "cuda"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert volumes["config"]["configMap"]["name"] == cm["metadata"]["name"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]


def test_a_broken_manifest_is_refused() -> None:
    manifests = render(parse({"model": "resnet50", "nodes": 2, "nproc": 8, "batch_size": 256, "device": "cuda",
                              "backend": "nccl"}), name="t", image="img")
    validate(manifests)
    manifests.job["spec"]["completionMode"] = "Sometimes"
    manifests.job["spec"]["template"]["spec"]["containers"][0]["gpus"] = 8  # not a container field
    with pytest.raises(CmxError, match="the Job manifest is invalid"):
        validate(manifests)


def test_bad_values_exit_2(cli: Any, tmp_path: Path) -> None:
    proc = cli("train-k8s", "--out", str(tmp_path), "--nproc", "8", "--batch-size", "100")
    assert proc.returncode == 2 and "batch_size 100 is not divisible by the 16 ranks" in proc.stderr, proc.stderr
