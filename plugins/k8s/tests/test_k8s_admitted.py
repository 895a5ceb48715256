"""Manifests a real cluster admits (#44 item 6): every manifest a single run and a sweep render
passes ``kubernetes-validate --strict`` (its own command line, as a user would run it on the
files), every pod asks for and is limited to CPU and memory, every Job has a
``podFailurePolicy``, and a sweep's Indexed Job carries the same recovery policy as the
single run's Job (``backoffLimitPerIndex`` for ``backoffLimit``, ``FailIndex`` for
``FailJob``). The training job's are checked in plugins/train/tests/test_train_k8s.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx_core.testing.cli import main
from cmx_k8s import manifests
from cmx_k8s.settings import K8sSettings

RETRIED = """\
name: test-k8s-admitted
tags: [test, k8sadmit]
summary: echoes its input, retried on lost nodes
inputs:
  n: {type: integer, default: 1}
retries: {max: 3, on: [node_lost, oom]}
steps:
  - uses: shell
    with: {cmd: [sh, -c, "echo n={{ inputs.n }}"], parse: kv}
"""

EXIT_2 = {"onExitCodes": {"containerName": "cmx", "operator": "In", "values": [2]}}
IGNORE_DISRUPTIONS = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def strict_cli(files: Iterable[Path]) -> subprocess.CompletedProcess[str]:
    """``kubernetes-validate --strict`` (the package's own command) on ``files``."""
    command = Path(sys.executable).with_name("kubernetes-validate")
    return subprocess.run([str(command), "--strict", "--kubernetes-version", manifests.SCHEMA_VERSION, "--quiet",
                           *map(str, files)], capture_output=True, text=True, timeout=300, check=False)


def pods_and_jobs(files: Iterable[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod specs (each Job's template) and the Jobs in ``files``."""
    jobs = [item for item in (yaml.safe_load(p.read_text()) for p in files) if item["kind"] == "Job"]
    return [job["spec"]["template"]["spec"] for job in jobs], jobs


def assert_admitted(files: list[Path]) -> list[dict[str, Any]]:
    """The files pass the strict validation; each pod has CPU and memory requests and limits,
    each Job a podFailurePolicy; the Jobs."""
    assert files
    checked = strict_cli(files)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    pods, jobs = pods_and_jobs(files)
    assert jobs
    for pod in pods:
        for container in pod["containers"]:
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    for job in jobs:
        assert job["spec"]["podFailurePolicy"]["rules"], job["metadata"]["name"]
    return jobs


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> None:
    capsys.readouterr()
    code = main(list(args))
    assert code == 0, capsys.readouterr().err


def test_the_strict_validator_refuses_what_a_cluster_would(tmp_path: Path) -> None:
    """The command line check itself: a field the schema does not know fails it."""
    job = manifests.job_manifest(manifests.JobSpec("cmx-x", "img:1", ("cmx",)), K8sSettings(pvc=""))
    job["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    checked = strict_cli([path])
    assert checked.returncode != 0 and "resourcez" in checked.stdout + checked.stderr


def test_a_single_run_and_a_sweep_render_what_a_cluster_admits(cmx_home: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "admitted.yaml").write_text(RETRIED)
    single, swept = tmp_path / "single", tmp_path / "sweep"
    _cli(capsys, "plan", "recipe", "--tags=test,k8sadmit", "--recipes", str(recipes), "--executor", "k8s",
         "--executor-opt", f"render={single}", "--executor-opt", "image=img:1", "--json")
    _cli(capsys, "sweep", "--tags=test,k8sadmit", "--recipes", str(recipes), "--matrix", "n=1,2,3", "--executor",
         "k8s", "--executor-opt", f"render={swept}", "--executor-opt", "image=img:1", "--json")
    [job] = assert_admitted(sorted(single.glob("*.yaml")))
    assert job["spec"]["backoffLimit"] == 3
    assert job["spec"]["podFailurePolicy"]["rules"] == [{"action": "FailJob", **EXIT_2}, IGNORE_DISRUPTIONS]
    for index in range(3):
        [point] = assert_admitted(sorted((swept / f"point-{index}").glob("*.yaml")))
        assert point["spec"]["podFailurePolicy"] == job["spec"]["podFailurePolicy"]
    [indexed] = assert_admitted(sorted((swept / "sweep-0").glob("*.yaml")))
    spec = indexed["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3
    assert spec["backoffLimitPerIndex"] == 3  # the single run's backoffLimit, for each point
    assert spec["podFailurePolicy"]["rules"] == [{"action": "FailIndex", **EXIT_2}, IGNORE_DISRUPTIONS]


def test_a_sweep_without_a_policy_still_fails_bad_input_at_once(cmx_home: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "render"
    _cli(capsys, "sweep", "--tags=demo,sort", "--matrix", "size=3,4", "--executor", "k8s", "--executor-opt",
         f"render={out}", "--executor-opt", "image=img:1", "--json")
    [indexed] = assert_admitted(sorted((out / "sweep-0").glob("*.yaml")))
    assert indexed["spec"]["backoffLimitPerIndex"] == 0
    assert indexed["spec"]["podFailurePolicy"]["rules"] == [{"action": "FailIndex", **EXIT_2}]


def test_a_200_point_sweeps_config_maps_are_each_under_256_kib() -> None:
    """Locks as large as a real point's (about 25 KB): split over ConfigMaps that a client-side
    ``kubectl apply`` takes (it copies each object into a 256 KiB annotation), quotes and
    ``<>&`` counted as that annotation escapes them."""
    locks = [json.dumps({"point": i, "cmd": "a && b > c", "pad": "\"x\"" * 8_000}) for i in range(200)]
    built = manifests.sweep_manifests(manifests.JobSpec("cmx-sweep-big", "img:1", manifests.sweep_command(["cmx"])),
                                      locks, K8sSettings(pvc=""))
    manifests.validate(built)
    assert len(built.config_maps) > 1
    for item in built.config_maps:
        text = json.dumps(item, separators=(",", ":"))
        annotation = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        assert len(annotation.encode()) < 256 * 1024, item["metadata"]["name"]
    assert {k: v for c in built.config_maps for k, v in c["data"].items()} == \
        {f"lock-{i}.json": text for i, text in enumerate(locks)}
