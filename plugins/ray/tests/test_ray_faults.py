"""Recovery on the Ray executor (docs/faults.md), on a real local Ray head: the chaos matrix
(each injected fault recovered by the far engine's retry, each point recorded once; exit
code 2 never retried), and the task's own retries from the policy: ``max_retries`` when it
retries a lost node, ``retry_exceptions`` never."""

from __future__ import annotations

from pathlib import Path

from cmx_core.api import RetryPolicy
from cmx_core.testing import execution_request
from cmx_core.testing.chaos import UnderTest, chaos_problems
from cmx_core.testing.runs import Recovery, engine
from cmx_ray.executor import retry_options


def test_the_chaos_matrix_on_a_local_ray_cluster(cmx_home: Path, ray_head: str, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    assert chaos_problems(recipes, UnderTest("ray", [f"address={ray_head}", "env=CMX_HOME"]), timeout_s=300) == []


def test_max_retries_follows_the_policy(cmx_home: Path, tmp_path: Path) -> None:
    the_plan = engine.plan("demo,sort")
    plain = execution_request(the_plan, tmp_path / "a")
    assert retry_options(plain) == {"max_retries": 0, "retry_exceptions": False}
    lost = execution_request(the_plan, tmp_path / "b", recovery=Recovery(RetryPolicy(3, 0, ("node_lost",))))
    assert retry_options(lost) == {"max_retries": 3, "retry_exceptions": False}
    other = execution_request(the_plan, tmp_path / "c", recovery=Recovery(RetryPolicy(3, 0, ("oom",))))
    assert retry_options(other)["max_retries"] == 0
