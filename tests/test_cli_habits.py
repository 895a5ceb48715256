"""Habits from CM and MLC work (#18 item 7): -q/--quiet/-s, global options before the command,
--KEY VALUE, running a recipe by name or by positional tags, --env.X= explained, python -m."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from cmx_core.cli.main import hoist_globals

COUNTER = """
name: counter
tags: [count, things]
summary: echoes its input
cache: false
inputs:
  n: {type: integer, default: 1}
  label: {type: string, default: x}
outputs: [n]
steps:
  - {uses: shell, with: {cmd: ["echo", "n={{ inputs.n }}"], parse: kv}}
"""


def _outputs(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    return doc


@pytest.mark.parametrize("args", [
    ["--tags=count,things", "--n", "7"],
    ["--tags=count,things", "--n=7"],
    ["counter", "--n", "7"],
    ["recipe", "count things", "--n", "7"],
    ["recipe", "count,things", "--input.n=7"],
])
def test_ways_to_name_the_recipe_and_inputs(cli: Callable[..., Any], recipes: Any, args: list[str]) -> None:
    recipes("counter", COUNTER)
    doc = _outputs(cli("run", "--recipes", str(recipes.dir), *args, "--json"))
    assert doc["software"]["recipe"]["name"] == "counter"
    assert doc["provenance"]["query"]["inputs"]["n"] == 7


def test_a_value_with_a_space_is_one_input(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("counter", COUNTER)
    doc = _outputs(cli("run", "--recipes", str(recipes.dir), "counter", "--label", "two words", "--json"))
    assert doc["provenance"]["query"]["inputs"]["label"] == "two words"


def test_words_and_tags_together_are_refused(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("counter", COUNTER)
    result = cli("run", "--recipes", str(recipes.dir), "counter", "--tags=count")
    assert result.code == 2 and "not both" in result.err


@pytest.mark.parametrize("flag", ["-q", "--quiet", "-s"])
def test_quiet_silences_progress(cli: Callable[..., Any], recipes: Any, flag: str) -> None:
    recipes("counter", COUNTER)
    loud = cli("run", "--recipes", str(recipes.dir), "counter")
    assert loud.code == 0 and "cmx: done counter" in loud.err
    quiet = cli(flag, "run", "--recipes", str(recipes.dir), "counter")
    assert quiet.code == 0, quiet.err
    assert "cmx: done" not in quiet.err and "COMPLETED" in quiet.out


def test_global_flags_move_after_the_command() -> None:
    assert hoist_globals(["-v", "--json", "run", "x"]) == ["run", "-v", "--json", "x"]
    assert hoist_globals(["run", "-v"]) == ["run", "-v"]
    assert hoist_globals(["--json"]) == ["--json"]


def test_verbose_before_the_command(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("counter", COUNTER)
    assert cli("-v", "run", "--recipes", str(recipes.dir), "counter").code == 0


def test_env_option_explains_env_allow(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("counter", COUNTER)
    result = cli("run", "--recipes", str(recipes.dir), "counter", "--env.CUDA_VISIBLE_DEVICES=0")
    assert result.code == 2 and len(result.err_lines) == 1
    assert "env_allow" in result.err and "--env.CUDA_VISIBLE_DEVICES=0" in result.err


def test_python_dash_m() -> None:
    done = subprocess.run([sys.executable, "-m", "cmx_core", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.startswith("cmx ")
