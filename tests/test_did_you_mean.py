""""Did you mean" in every unknown-name error: tags, variations, inputs, commands, choices,
plugin names and executor options, all from one helper (``cmx_core.run.settings.did_you_mean``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cmx_core.errors import did_you_mean

SORTER = """
name: sorter
tags: [demo, sort]
summary: sorts
inputs:
  size: {type: integer, default: 3}
variations:
  fast: {group: speed, default: true}
  slow: {group: speed}
  batch.#: {}
steps:
  - {uses: shell, with: {cmd: ["true"]}}
"""

SIBLING = """
name: sibling
tags: [demo, sort, extra]
summary: another sorter
variations:
  slow: {}
steps:
  - {uses: shell, with: {cmd: ["true"]}}
"""


def test_helper_gives_close_names_and_nothing_for_far_ones() -> None:
    assert did_you_mean("srot", ["sort", "demo"]) == "; did you mean 'sort'?"
    assert did_you_mean("zzzz", ["sort", "demo"]) == ""
    both = did_you_mean("rn", ["run", "ran", "plan"], n=2)
    assert both in ("; did you mean 'ran' or 'run'?", "; did you mean 'run' or 'ran'?")


def _error(cli: Callable[..., Any], *args: str) -> str:
    result = cli(*args)
    assert result.code == 2, result.err
    assert len(result.err_lines) == 1, result.err
    return str(result.err_lines[0])


@pytest.mark.parametrize(("args", "wanted"), [
    (["--tags=demo,srot"], "did you mean 'sort'?"),
    (["--tags=demo,sort,slwo"], "did you mean 'slow'?"),
    (["--tags=demo,sort,bach.4"], "did you mean 'batch.'?"),
    (["--tags=dmeo"], "did you mean 'demo'"),
    (["--tags=demo,sort,fast", "--sizee=4"], "unknown input 'sizee' for recipe sorter; did you mean 'size'?"),
])
def test_resolver_errors_suggest(cli: Callable[..., Any], recipes: Any, args: list[str], wanted: str) -> None:
    recipes("sorter", SORTER)
    assert wanted in _error(cli, "plan", "--recipes", str(recipes.dir), *args)


def test_ambiguous_match_gives_each_candidates_reason(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("sorter", SORTER)
    recipes("sibling", SIBLING)
    line = _error(cli, "plan", "--recipes", str(recipes.dir), "--tags=demo,sort,slow")
    assert "match 2 recipes" in line
    assert "sibling" in line and "variation slow; has tags demo,sort,extra" in line
    assert "sorter" in line and "has tags demo,sort" in line


def test_misspelt_recipe_name_suggests_the_recipe(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("sorter", SORTER)
    line = _error(cli, "run", "--recipes", str(recipes.dir), "sortre")
    assert "; did you mean 'sort'?; or the recipe 'sorter'?" in line


def test_far_tag_gets_no_suggestion(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("sorter", SORTER)
    line = _error(cli, "plan", "--recipes", str(recipes.dir), "--tags=qqqqqq")
    assert "no recipe has any of the tags 'qqqqqq'" in line and "did you mean" not in line


@pytest.mark.parametrize(("args", "wanted"), [
    (["rn"], "invalid choice: 'rn'"),
    (["results", "lsit"], "did you mean 'list'?"),
    (["list", "recipe"], "did you mean 'recipes'?"),
])
def test_commands_and_choices_suggest(cli: Callable[..., Any], args: list[str], wanted: str) -> None:
    line = _error(cli, *args)
    assert wanted in line
    assert "did you mean" in line


def test_plugin_name_suggests(cli: Callable[..., Any]) -> None:
    line = _error(cli, "plugins", "info", "mlprf")
    assert "no plugin named 'mlprf'" in line and "did you mean 'cmx-mlperf'?" in line


def test_executor_option_suggests(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("sorter", SORTER)
    line = _error(cli, "plan", "--recipes", str(recipes.dir), "--tags=demo,sort", "--executor-opt", "timeuot=3")
    assert "unknown option 'timeuot'" in line


def test_show_recipe_with_a_misspelt_name_suggests_the_recipe(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("sorter", SORTER)
    line = _error(cli, "show", "recipe", "sortre", "--recipes", str(recipes.dir))
    assert "no recipe named 'sortre'; did you mean 'sorter'?" in line
