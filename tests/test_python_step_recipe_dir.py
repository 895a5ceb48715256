"""A python step imports a module kept next to its recipe file, with no ``PYTHONPATH`` (#18 item 5)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECIPE = """
name: {name}
tags: [{name}]
summary: a python step whose module sits beside the recipe
steps:
  - uses: python
    with: {{function: "cmx_beside:measure"}}
outputs:
  which: {{description: which module ran}}
"""

MODULE = """
def measure(ctx):
    return {{"which": "{which}"}}
"""


def _recipe_dir(root: Path, name: str, which: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "recipe.yaml").write_text(RECIPE.format(name=name))
    (directory / "cmx_beside.py").write_text(MODULE.format(which=which))
    return directory


def _run(cli: Callable[..., Any], root: Path, tag: str) -> Any:
    return cli("run", "recipe", f"--tags={tag}", "--recipes", str(root), "--json")


def test_a_module_beside_the_recipe_is_imported_without_pythonpath(cli: Callable[..., Any], tmp_path: Path) -> None:
    root = tmp_path / "recipes"
    _recipe_dir(root, "beside-a", "a")
    result = _run(cli, root, "beside-a")
    assert result.code == 0, result.err
    assert json.loads(result.out)["outputs"]["which"] == "a"
    assert str(root / "beside-a") not in sys.path  # the path was only there for the import


def test_two_recipes_with_same_named_modules_each_get_their_own(cli: Callable[..., Any], tmp_path: Path) -> None:
    root = tmp_path / "recipes"
    _recipe_dir(root, "beside-a", "a")
    _recipe_dir(root, "beside-b", "b")
    first, second = _run(cli, root, "beside-a"), _run(cli, root, "beside-b")
    assert first.code == 0 and second.code == 0, first.err + second.err
    assert json.loads(first.out)["outputs"]["which"] == "a"
    assert json.loads(second.out)["outputs"]["which"] == "b"


def test_a_module_shadowing_an_imported_one_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    root = tmp_path / "recipes"
    directory = root / "shadow"
    directory.mkdir(parents=True)
    (directory / "recipe.yaml").write_text(RECIPE.format(name="shadow").replace("cmx_beside", "json"))
    (directory / "json.py").write_text(MODULE.format(which="shadow"))
    result = _run(cli, root, "shadow")
    assert result.code == 2, result.err
    assert "rename it" in result.err and "Traceback" not in result.err
    assert json.dumps({"ok": 1}) == '{"ok": 1}'  # the real json module is still the one loaded
