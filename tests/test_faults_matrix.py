"""The chaos matrix on the local executor (cmx_core.testing.chaos; the cluster executors run
the same matrix in their own tests): every point of a sweep with one injected fault each is
recorded exactly once, with the fault and the retry that recovered from it, and a refused
input (exit code 2) is not retried."""

from __future__ import annotations

from pathlib import Path

from cmx_core.testing.chaos import UnderTest, chaos_problems


def test_the_chaos_matrix_on_the_local_executor(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    assert chaos_problems(recipes, UnderTest("local"), timeout_s=120) == []
