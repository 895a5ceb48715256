"""``--inject kill-worker`` on Ray (docs/faults.md), on a real local cluster of a head and two
worker nodes, each its own raylet (tests/multinode.py): the raylet of the node that runs the
task is killed with SIGKILL, Ray marks the node dead and, under a policy that retries
``node_lost``, runs the task again on the other node by its own ``max_retries``; the point is
recorded once, with the lost attempt and the one that succeeded. Without such a policy the
task is not retried. A task on the head node is not struck: the run says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cmx_core.testing.chaos import CHAOS_TAG, UnderTest, chaos_problems, chaos_recipe, recorded_result
from cmx_ray.cluster import RAY_ENV

from .multinode import Workers

_ALIVE_WORKERS = ("import json, sys, ray; ray.init(address=sys.argv[1], _node_ip_address='127.0.0.1', "
                  "log_to_driver=False, configure_logging=False); "
                  "print(sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('CPU')))")


def _alive_workers(address: str) -> int:
    """Alive nodes with CPUs (the workers), asked by a driver of its own."""
    out = subprocess.run([sys.executable, "-c", _ALIVE_WORKERS, address], capture_output=True, text=True,
                         timeout=120, env={**os.environ, **RAY_ENV}, check=True).stdout
    return int(out.strip().splitlines()[-1])


def test_a_killed_worker_node_is_recovered_by_rays_own_retry(ray_workers: Workers, cmx_home: Path,
                                                             tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    under_test = UnderTest("ray", [f"address={ray_workers.address}", "env=CMX_HOME"], kill_worker=True)
    assert chaos_problems(recipes, under_test, faults=["kill-worker"], timeout_s=300) == []
    assert _alive_workers(ray_workers.address) == 1  # the node whose raylet was killed is gone
    ray_workers.add()


def test_a_lost_node_the_policy_does_not_name_is_not_retried(ray_workers: Workers, cmx_home: Path,
                                                             tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "chaos-matrix.yaml").write_text(chaos_recipe())
    proc = _run(recipes, ray_workers.address, "--retries=1", "--retry-on=oom")
    document = recorded_result(proc.stderr)
    assert proc.returncode == 1 and document is not None, proc.stderr[-2000:]
    assert document["status"] == "error"
    assert [(a["number"], a["fault"], a["injected"]) for a in document["attempts"]] == [(1, "node_lost", "kill-worker")]
    ray_workers.add()


def test_a_task_on_the_head_node_is_not_struck(ray_head: str, cmx_home: Path, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "chaos-matrix.yaml").write_text(chaos_recipe())
    proc = _run(recipes, ray_head, "--retries=1")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "runs on the head node" in proc.stderr and "Traceback" not in proc.stderr


def _run(recipes: Path, address: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core", "run", "--recipes", str(recipes), "--tags",
                           f"test,{CHAOS_TAG}", "--what=work", *options, "--inject=kill-worker", "--executor=ray",
                           f"--executor-opt=address={address}", "--executor-opt=env=CMX_HOME", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
