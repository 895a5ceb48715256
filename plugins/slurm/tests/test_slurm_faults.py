"""Recovery on the Slurm executor (docs/faults.md), on the loopback single-node cluster: the
chaos matrix (each injected fault recovered by the far engine's retry, each point recorded
once; exit code 2 never retried), and ``--requeue`` from a policy that retries lost nodes or
preemptions."""

from __future__ import annotations

from pathlib import Path

from cmx_slurm.executor import requeue_args
from cmx_slurm.testing import Cluster

from cmx_core.providers.recovery import Recovery, RetryPolicy
from cmx_core.run import engine
from cmx_core.testing import execution_request
from cmx_core.testing.chaos import chaos_problems


def test_the_chaos_matrix_on_the_loopback_slurm(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    assert chaos_problems(recipes, "slurm", ["poll_s=0.2"], timeout_s=300) == []


def test_requeue_follows_the_policy(cmx_home: Path, tmp_path: Path) -> None:
    the_plan = engine.plan("demo,sort")
    assert requeue_args(execution_request(the_plan, tmp_path / "a")) == []
    lost = Recovery(RetryPolicy(2, 0, ("node_lost", "preempted")))
    assert requeue_args(execution_request(the_plan, tmp_path / "b", recovery=lost)) == ["--requeue"]
    oom = Recovery(RetryPolicy(2, 0, ("oom",)))
    assert requeue_args(execution_request(the_plan, tmp_path / "c", recovery=oom)) == []
