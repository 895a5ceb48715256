"""Recovery on the Kubernetes executor (docs/faults.md), against the STAND-IN API server
(standin.py; no real cluster can run here): the chaos matrix (each injected fault recovered
by the far engine's retry, a pod evicted by ``kill-worker`` replaced by the Job itself,
each point recorded once; exit code 2 never retried), and the Job's own policy:
``backoffLimit`` from the recipe's retries, a ``podFailurePolicy`` that fails the Job at
once on exit code 2 and ignores disruptions, validated against the Kubernetes schema and
honoured by the stand-in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import standin

from cmx_core.errors import CmxError
from cmx_core.testing.chaos import UnderTest, chaos_problems
from cmx_core.testing.runs import engine

RETRIED = """\
name: test-k8s-retried
tags: [test, k8s, retried]
summary: a policy the Job maps to its own
retries: {max: 3, on: [node_lost, oom]}
steps:
  - uses: shell
    with: {cmd: [sh, -c, "exit 0"]}
"""


def _opts(kubeconfig: Path) -> list[str]:
    return [f"kubeconfig={kubeconfig}", "image=cmx-python:standin", f"python={sys.executable}",
            f"cmx={sys.executable} -m cmx_core", "poll_s=0.2"]


def test_the_chaos_matrix_on_the_k8s_standin(cmx_home: Path, tmp_path: Path,
                                             cluster: tuple[Path, standin.StandIn]) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    assert chaos_problems(recipes, UnderTest("k8s", _opts(cluster[0]), kill_worker=True), timeout_s=240) == []
    evicted = [name for method, name in cluster[1].calls if method == "EVICT"]
    assert len(evicted) == 1, cluster[1].calls  # the kill-worker point's pod, once


def test_the_job_fails_at_once_on_exit_code_2(cmx_home: Path, tmp_path: Path,
                                               cluster: tuple[Path, standin.StandIn]) -> None:
    (tmp_path / "r.yaml").write_text(RETRIED.replace('"exit 0"', '"exit 2"'))
    options = dict(o.split("=", 1) for o in _opts(cluster[0]))
    with pytest.raises(CmxError) as failed:
        engine.run_tags("test,k8s,retried", recipes_dirs=[tmp_path], executor="k8s", options=options)
    assert failed.value.exit_code == 2
    [run] = cluster[1].deleted.values()
    assert (len(run.pods), run.ended, run.reason) == (1, "Failed", "PodFailurePolicy")


def test_the_job_carries_the_recipes_policy(cmx_home: Path, tmp_path: Path,
                                            cluster: tuple[Path, standin.StandIn]) -> None:
    (tmp_path / "r.yaml").write_text(RETRIED)
    options = dict(o.split("=", 1) for o in _opts(cluster[0]))
    result = engine.run_tags("test,k8s,retried", recipes_dirs=[tmp_path], executor="k8s", options=options)
    job = next(json.loads(p.read_text()) for p in (result.run_dir / "k8s").glob("*.json")
               if json.loads(p.read_text())["kind"] == "Job")
    spec = job["spec"]
    assert spec["backoffLimit"] == 3
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onExitCodes": {"containerName": "cmx", "operator": "In", "values": [2]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]


def test_without_a_policy_the_job_retries_nothing(cmx_home: Path, tmp_path: Path,
                                                  cluster: tuple[Path, standin.StandIn]) -> None:
    (tmp_path / "r.yaml").write_text(RETRIED.replace("retries: {max: 3, on: [node_lost, oom]}\n", ""))
    options = dict(o.split("=", 1) for o in _opts(cluster[0]))
    result = engine.run_tags("test,k8s,retried", recipes_dirs=[tmp_path], executor="k8s", options=options)
    job = next(json.loads(p.read_text()) for p in (result.run_dir / "k8s").glob("*.json")
               if json.loads(p.read_text())["kind"] == "Job")
    assert job["spec"]["backoffLimit"] == 0  # every Job has a podFailurePolicy (#44): exit code 2 fails it at once
    assert job["spec"]["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onExitCodes": {"containerName": "cmx", "operator": "In", "values": [2]}}]
