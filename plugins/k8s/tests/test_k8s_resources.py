"""The recipe's ``resources:`` through the k8s executor: each key becomes the Job field
docs/recipes.md's table says (in a manifest valid against the Kubernetes schema), the
settings override it, and a multi-node recipe is refused naming the executor that runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cmx_core.errors import UsageError
from cmx_core.testing.runs import engine
from cmx_k8s import manifests
from tests.test_recipe_resources import doc_mapping, doc_recipe, write_recipe

FACTS = Path(__file__).resolve().parents[3] / "examples" / "facts" / "h100-sxm-8x.json"


def _render(tmp_path: Path, **options: str) -> dict[str, object]:
    recipes = tmp_path / "recipes"
    write_recipe(recipes, doc_recipe().replace("  nodes: 2 ", "  nodes: 1 "))
    out = tmp_path / "render"
    engine.plan_view("train,tiny", recipes_dirs=[recipes], facts_file=FACTS, executor="k8s",
                     options={"render": str(out), "image": "img:1", **options})
    job = yaml.safe_load((out / "job.yaml").read_text())
    manifests.validate(manifests.RunManifests(yaml.safe_load((out / "configmap.yaml").read_text()), None, job))
    return job  # type: ignore[no-any-return]


def test_each_key_becomes_the_documented_job_field(cmx_home: Path, tmp_path: Path) -> None:
    job = _render(tmp_path)
    pod = job["spec"]["template"]["spec"]  # type: ignore[index]
    limits = pod["containers"][0]["resources"]["limits"]
    documented = doc_mapping("Kubernetes")
    assert documented["cpus"] == f'`limits.cpu: "{limits["cpu"]}"`' and limits["cpu"] == "8"
    assert documented["gpus"] == f"`limits.nvidia.com/gpu: {limits['nvidia.com/gpu']}`"
    assert documented["memory"] == f"`limits.memory: {limits['memory']}`"
    assert documented["time"] == f"`activeDeadlineSeconds: {job['spec']['activeDeadlineSeconds']}`"  # type: ignore[index]
    assert documented["accelerator"] == "`nodeSelector` on the GPU product label"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_settings_override_the_recipe(cmx_home: Path, tmp_path: Path) -> None:
    job = _render(tmp_path, cpus="2", memory="1Gi", gpus="1", timeout_s="60")
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]  # type: ignore[index]
    assert limits == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1}
    assert job["spec"]["activeDeadlineSeconds"] == 60  # type: ignore[index]


def test_a_multi_node_recipe_is_refused(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe())
    with pytest.raises(UsageError, match=r"asks for 2 node\(s\).*use --executor slurm"):
        engine.plan("train,tiny", recipes_dirs=[tmp_path], executor="k8s", options={"image": "img:1"})
