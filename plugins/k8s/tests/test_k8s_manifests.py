"""Manifests of the k8s executor, validated client-side against the Kubernetes 1.37 schema
(kubernetes-validate, offline): the 8xH100 MLPerf plan renders to a Job asking 8 GPUs on
the H100 product label, an Indexed Job for a sweep, and bad input is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cmx_core.errors import CmxError, UsageError
from cmx_core.testing import execution_context
from cmx_core.testing.runs import engine
from cmx_k8s import manifests
from cmx_k8s.gpu import GpuRequest, label_value
from cmx_k8s.settings import K8sSettings

FACTS = Path(__file__).resolve().parents[3] / "examples" / "facts" / "h100-sxm-8x.json"


def test_the_8xh100_mlperf_plan_renders_valid_manifests(cmx_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "render"
    view = engine.plan_view("mlperf,llama,h100", facts_file=FACTS, executor="k8s",
                            options={"render": str(out), "image": "registry.example.org/cmx-vllm:test"})
    shown = view.to_json()["executor"]
    assert shown["gpus"] == "8 x nvidia.com/gpu"
    assert shown["node selector"] == "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
    job = yaml.safe_load((out / "job.yaml").read_text())
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    assert {v["name"]: next(iter(k for k in v if k != "name")) for v in pod["volumes"]} == {
        "inputs": "configMap", "work": "emptyDir", "cache": "persistentVolumeClaim", "shm": "emptyDir"}
    config = yaml.safe_load((out / "configmap.yaml").read_text())
    assert json.loads(config["data"]["lock.json"]) == json.loads((out / "lock.json").read_text())
    import kubernetes_validate

    for name in ("job.yaml", "configmap.yaml", "persistentvolumeclaim.yaml"):
        kubernetes_validate.validate(yaml.safe_load((out / name).read_text()), manifests.SCHEMA_VERSION, strict=True)


def test_the_image_is_cmx_dockers_content_addressed_tag(cmx_home: Path) -> None:
    from cmx_docker.executor import DockerExecutor
    from cmx_docker.settings import DockerSettings

    plan = engine.plan("demo,sort")
    docker_tag = DockerExecutor().describe(execution_context(plan, DockerSettings()))["image"]
    view = engine.plan_view("demo,sort", executor="k8s", options={"image_prefix": "reg.example.org/x/"})
    assert view.to_json()["executor"]["image"] == f"reg.example.org/x/{docker_tag}"
    assert view.to_json()["executor"]["gpus"] == "none"


def test_a_sweep_is_one_indexed_job() -> None:
    settings = K8sSettings(pvc="")
    gpus = GpuRequest("h100", 1, "nvidia", "NVIDIA-H100-80GB-HBM3")
    built = manifests.sweep_manifests(manifests.JobSpec("cmx-sweep-1", "img:1", manifests.sweep_command(["cmx"]),
                                                         gpus), ["{}", '{"a": 1}', "{}"], settings, parallelism=2)
    manifests.validate(built)  # backoffLimitPerIndex is in the 1.37 schema
    spec = built.job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3 and spec["parallelism"] == 2
    assert spec["backoffLimitPerIndex"] == 0 and "backoffLimit" not in spec  # a failed index ends only itself
    assert sorted(built.config_map["data"]) == ["lock-0.json", "lock-1.json", "lock-2.json"]
    command = spec["template"]["spec"]["containers"][0]["command"]
    assert "/cmx/inputs/lock-$(CMX_POINT_INDEX).json" in command
    env = spec["template"]["spec"]["containers"][0]["env"]
    assert {"name": "CMX_POINT_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}} in env
    assert built.pvc is None


def test_backoff_limit_per_index_is_checked_by_the_schema() -> None:
    spec = manifests.JobSpec("cmx-sweep-2", "img:1", manifests.sweep_command(["cmx"]))
    built = manifests.sweep_manifests(spec, ["{}"], K8sSettings(pvc=""))
    built.job["spec"]["backoffLimitPerIndex"] = "none"
    with pytest.raises(CmxError, match=r"invalid at spec.backoffLimitPerIndex: 'none' is not of type"):
        manifests.validate(built)


def test_an_invalid_manifest_is_refused_with_its_path() -> None:
    settings = K8sSettings(memory="lots of it", pvc="")
    built = manifests.run_manifests(manifests.JobSpec("cmx-x", "img:1", ("cmx",)), "{}", settings)
    built.job["spec"]["backoffLimit"] = "three"
    with pytest.raises(CmxError, match=r"the Job manifest is invalid at spec.backoffLimit: 'three' is not of type"):
        manifests.validate(built)


@pytest.mark.parametrize(("name", "value"), [("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
                                             ("NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
                                             ("AMD Instinct MI300X", "AMD-Instinct-MI300X")])
def test_product_label_values(name: str, value: str) -> None:
    assert label_value(name) == value


@pytest.mark.parametrize(("options", "message"), [
    ({"gpus": "eight"}, r"k8s executor option gpus='eight': use an integer"),
    ({"max_result_mb": "0"}, r"k8s executor option max_result_mb=0: use a number above 0"),
    ({"namespce": "x"}, r"unknown option 'namespce'; did you mean 'namespace'\?"),
])
def test_bad_options_are_one_line_usage_errors(cmx_home: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        engine.plan("demo,sort", executor="k8s", options=options)
    assert "\n" not in str(caught.value)


def test_a_metrics_port_adds_prometheus_scrape_annotations() -> None:
    import kubernetes_validate

    built = manifests.run_manifests(manifests.JobSpec("cmx-run-1", "img:1", ("cmx",)), "{}",
                                    K8sSettings(pvc="", metrics_port=9464))
    manifests.validate(built)
    kubernetes_validate.validate(built.job, manifests.SCHEMA_VERSION, strict=True)
    template = built.job["spec"]["template"]
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "9464",
                                                   "prometheus.io/path": "/metrics"}
    container = template["spec"]["containers"][0]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
    env = {v["name"]: v.get("value") for v in container["env"]}
    assert env["CMX_METRICS_PORT"] == "9464" and env["CMX_METRICS_ADDR"] == "0.0.0.0"  # the pod's own network
    plain = manifests.run_manifests(manifests.JobSpec("cmx-run-2", "img:1", ("cmx",)), "{}", K8sSettings(pvc=""))
    assert "annotations" not in plain.job["spec"]["template"]["metadata"]


def test_a_kubernetes_version_without_bundled_schemas_is_a_one_line_error() -> None:
    from cmx_k8s import schema

    with pytest.raises(CmxError, match=r"no schema v0\.1\.0-local-strict/job-batch-v1\.json for Kubernetes 0\.1\.0"):
        schema.object_validator("Job", "batch/v1", "0.1.0")


def test_the_validator_of_a_kind_is_built_once_and_checks_what_kubernetes_validate_checks() -> None:
    import jsonschema
    import kubernetes_validate

    from cmx_k8s import schema

    built = manifests.run_manifests(manifests.JobSpec("cmx-once", "img:1", ("cmx",)), "{}", K8sSettings(pvc=""))
    assert schema.object_validator("Job", "batch/v1", manifests.SCHEMA_VERSION) is \
        schema.object_validator("Job", "batch/v1", manifests.SCHEMA_VERSION)
    bad = {**built.job, "spec": {**built.job["spec"], "parallelism": "two"}}
    with pytest.raises(jsonschema.ValidationError) as ours:
        schema.check(bad, manifests.SCHEMA_VERSION)
    with pytest.raises(kubernetes_validate.ValidationError) as theirs:
        kubernetes_validate.validate(bad, manifests.SCHEMA_VERSION, strict=True)
    assert (list(ours.value.path), ours.value.message) == (list(theirs.value.path), theirs.value.message)
