"""Recovery on the Slurm executor (docs/faults.md), on the loopback single-node cluster: the
chaos matrix (each injected fault recovered by the far engine's retry, a job whose node
``kill-worker`` set down requeued by Slurm itself, each point recorded once; exit code 2
never retried), ``--requeue`` from a policy that retries lost nodes or preemptions, and a
lost node not retried when the policy does not name it. The kill-worker cell takes about
three minutes: Slurm holds a requeued job back (its begin time) before it runs again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cmx_slurm.executor import requeue_args
from cmx_slurm.testing import Cluster

from cmx_core.providers.recovery import Recovery, RetryPolicy
from cmx_core.run import engine
from cmx_core.testing import execution_request
from cmx_core.testing.chaos import CHAOS_TAG, chaos_problems, chaos_recipe


def test_the_chaos_matrix_on_the_loopback_slurm(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    assert chaos_problems(recipes, "slurm", ["poll_s=0.2"], timeout_s=420, kill_worker=True) == []
    assert _node_state() == "idle"  # the node set down was resumed


def test_a_lost_node_the_policy_does_not_name_is_not_retried(slurm: Cluster, cmx_home: Path,
                                                             tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "chaos-matrix.yaml").write_text(chaos_recipe())
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "--recipes", str(recipes), "--tags",
                           f"test,{CHAOS_TAG}", "--what=work", "--retries=1", "--retry-on=oom", "--inject=kill-worker",
                           "--executor=slurm", "--executor-opt=poll_s=0.2", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    recorded = [line.split(" was recorded in ", 1)[1].strip() for line in proc.stderr.splitlines()
                if " was recorded in " in line]
    assert proc.returncode == 1 and recorded, proc.stderr[-2000:]
    document = json.loads(Path(recorded[0]).read_text())
    assert document["status"] == "error"
    assert [(a["number"], a["fault"], a["injected"]) for a in document["attempts"]] == [(1, "node_lost", "kill-worker")]
    assert "NODE_FAIL" in document["error"]["message"]
    assert _node_state() == "idle"


def _node_state() -> str:
    return subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=60,
                          check=False).stdout.strip()


def test_requeue_follows_the_policy(cmx_home: Path, tmp_path: Path) -> None:
    the_plan = engine.plan("demo,sort")
    assert requeue_args(execution_request(the_plan, tmp_path / "a")) == ["--no-requeue"]
    lost = Recovery(RetryPolicy(2, 0, ("node_lost", "preempted")))
    assert requeue_args(execution_request(the_plan, tmp_path / "b", recovery=lost)) == ["--requeue"]
    oom = Recovery(RetryPolicy(2, 0, ("oom",)))
    assert requeue_args(execution_request(the_plan, tmp_path / "c", recovery=oom)) == ["--no-requeue"]
