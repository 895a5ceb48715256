"""Cycle detection is keyed by recipe, variations and inputs: a recipe may depend on itself
with another variation (as CM's ``get-generic-python-lib`` with ``_package.x`` depends on
itself with ``_pip``); the same recipe with the same variations and inputs on the path is a
cycle, named by its path in one line; one that asks for itself with new inputs for ever is
stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core.errors import ResolveError
from cmx_core.resolve.resolver import SELF_DEPTH
from cmx_core.run import engine

STEP = "steps:\n  - {uses: shell, with: {cmd: [echo, x]}}\n"

PYLIB = """name: get-generic-python-lib
tags: [get, generic-python-lib]
summary: a python package, installed with pip
inputs:
  package: {type: string, default: ""}
variations:
  pip: {}
  package.#: {inputs: {package: "#"}, deps: [{tags: [generic-python-lib, pip], as: pip}]}
""" + STEP


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(text)
    return directory


def test_a_recipe_depending_on_itself_with_another_variation_plans(tmp_path: Path) -> None:
    recipes = write(tmp_path / "r", "pylib", PYLIB)
    plan = engine.plan("get,generic-python-lib,_package.numpy", recipes_dirs=[recipes])
    assert [n.id for n in plan.nodes] == ["get-generic-python-lib", "get-generic-python-lib[package.numpy]"]
    dep, root = plan.nodes
    assert dict(dep.variations) == {"pip": True} and dict(root.variations) == {"package": "numpy"}
    assert root.inputs["package"] == "numpy" and dep.inputs["package"] == ""
    assert root.deps == {"pip": dep.id}


def test_the_same_variation_on_the_path_is_a_cycle_naming_it(tmp_path: Path) -> None:
    recipes = write(tmp_path / "r", "pylib", PYLIB.replace("pip]", "package.numpy]"))
    with pytest.raises(ResolveError) as caught:
        engine.plan("get,generic-python-lib,_package.numpy", recipes_dirs=[recipes])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("dependency cycle: get-generic-python-lib -> get-generic-python-lib[package.numpy] ")
    assert str(recipes / "pylib.yaml") in message


def test_a_cycle_through_another_recipe_is_named_in_one_line(tmp_path: Path) -> None:
    recipes = write(tmp_path / "r", "a", "name: a\ntags: [a]\nsummary: a\nvariations:\n  x: {}\n  y: {}\n"
                    "deps: [{tags: [b]}]\n" + STEP)
    write(recipes, "b", "name: b\ntags: [b]\nsummary: b\ndeps: [{tags: [a, x]}]\n" + STEP)
    with pytest.raises(ResolveError, match=r"^dependency cycle: b -> a -> b \(in .*b\.yaml\)$"):
        engine.plan("a,_y", recipes_dirs=[recipes])


def test_same_recipe_with_other_inputs_each_time_is_stopped(tmp_path: Path) -> None:
    recipes = write(tmp_path / "r", "grow", "name: grow\ntags: [grow]\nsummary: asks for itself with n+1\n"
                    "inputs:\n  n: {type: integer, default: 0}\n"
                    "deps: [{tags: [grow], with: {n: '{{ inputs.n + 1 }}'}}]\n" + STEP)
    with pytest.raises(ResolveError, match=rf"recipe grow depends on itself {SELF_DEPTH} levels deep"):
        engine.plan("grow", recipes_dirs=[recipes])


def test_cli_names_the_cycle_in_one_line_with_exit_2(tmp_path: Path) -> None:
    recipes = write(tmp_path / "r", "pylib", PYLIB.replace("pip]", "package.numpy]"))
    done = subprocess.run([sys.executable, "-m", "cmx_core.cli.main", "plan", "--recipes", str(recipes),
                           "--tags=get,generic-python-lib,_package.numpy"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CMX_HOME": str(tmp_path / "home")})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "dependency cycle: get-generic-python-lib -> " in lines[0], done.stderr
    assert "Traceback" not in done.stderr
