"""The tutorial ``docs/tutorial-first-benchmark.md`` works as written: its recipe, copied from
the page, runs and reports ns per loop from ``python -m timeit`` (#18 item 5)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "tutorial-first-benchmark.md"


def _block(lang: str) -> str:
    found = re.search(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None, f"no {lang} block in {DOC}"
    return found.group(1)


def test_tutorial_recipe_reports_ns_per_loop(cli: Callable[..., Any], tmp_path: Path) -> None:
    recipes = tmp_path / "my-recipes"
    recipes.mkdir()
    (recipes / "timeit-sum.yaml").write_text(_block("yaml"))
    command = _block("sh").split()
    assert command[:2] == ["cmx", "run"]
    args = [a if a != "my-recipes" else str(recipes) for a in command[1:]]
    result = cli(*args, "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    metric = doc["metrics"]["per_loop_ns"]
    assert metric["unit"] == "ns" and metric["higher_is_better"] is False
    assert metric["value"] > 0
    assert doc["benchmark"]["primary_metric"] == "per_loop_ns"
    assert doc["status"] == "valid"  # measures: true: the step is the benchmark
    text = cli(*args)
    assert "per_loop_ns" in text.out and " ns" in text.out and " ms" not in text.out
    assert text.out.startswith("VALID ")


def test_without_measures_the_run_ends_completed(cli: Callable[..., Any], tmp_path: Path) -> None:
    recipes = tmp_path / "my-recipes"
    recipes.mkdir()
    text = _block("yaml")
    assert "    measures: true\n" in text
    (recipes / "timeit-sum.yaml").write_text(text.replace("    measures: true\n", ""))
    result = cli("run", "--recipes", recipes, "--tags=tutorial,timeit", "--n=10", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["status"] == "completed"


def test_tutorial_claims_match_the_schema() -> None:
    from cmx_core.builtin.plugin import SHELL_PARAMS_SCHEMA

    spec = SHELL_PARAMS_SCHEMA["properties"]["metrics"]["additionalProperties"]
    assert {"regex", "json", "kv", "unit", "higher_is_better"} == set(spec["properties"])
    assert spec["required"] == ["unit"]
