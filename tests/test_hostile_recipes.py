"""Hostile or surprising recipe files (#17): an alias bomb, a huge or too-deep file, values
YAML would silently retype; each is a one-line error naming the file and line, or keeps the
value the author wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import RecipeError
from cmx_core.recipes.yaml_lines import MAX_DEPTH, MAX_FILE_BYTES, parse_yaml


def _bomb(levels: int) -> str:
    lines = ["name: bomb", "tags: [bomb]", "summary: an alias bomb inside a step", "steps:",
             "  - uses: shell", "    with:", "      cmd: [echo, hi]", "      a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"      a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_quickly_by_every_reader(tmp_path: Path, cmx_home: Path) -> None:
    """9 levels of 9 aliases: 387 M nodes once expanded, from 700 bytes. It used to hang every
    command that read the directory; bounded here by the subprocess timeout."""
    (tmp_path / "bomb.yaml").write_text(_bomb(9))
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "list", "recipes", "--recipes", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert "bomb.yaml:" in proc.stderr and "expands to more than" in proc.stderr and "Traceback" not in proc.stderr
    assert "demo-sort" in proc.stdout  # the other recipes are still listed


def test_size_and_depth_limits(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"more than a recipe may be"):
        parse_yaml(b"name: x\n" + b"#" * MAX_FILE_BYTES, tmp_path / "big.yaml")
    deep = "a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n"
    with pytest.raises(RecipeError, match=rf"nests deeper than {MAX_DEPTH} levels"):
        parse_yaml(deep.encode(), tmp_path / "deep.yaml")
    assert parse_yaml(_bomb(3).encode(), tmp_path / "small.yaml")["steps"][0]["with"]["a2"][0][0] == ["x"] * 9


def test_versions_and_tags_keep_the_text_written() -> None:
    data = parse_yaml(b"version: 1.10\ntags: [vr, no, on, 3]\ndeps:\n  - {tags: [off], version: 2.0}\n",
                      Path("r.yaml"))
    assert data["version"] == "1.10" and data["tags"] == ["vr", "no", "on", "3"]
    assert data["deps"][0] == {"tags": ["off"], "version": "2.0"}
    assert parse_yaml(b"with: {flag: no, n: 1.10}\n", Path("r.yaml")) == {"with": {"flag": False, "n": 1.1}}


NUMBERS = """
name: typed
tags: [typed]
summary: a number input from the CLI stays the number it was
inputs:
  x: {type: number, default: 100}
steps:
  - uses: shell
    with: {cmd: [echo, "{{ inputs.x }}"]}
"""


def test_a_number_input_given_as_its_default_is_the_same_run(cli: Callable[..., Any],
                                                             recipes: Callable[[str, str], Path]) -> None:
    recipes("typed", NUMBERS)
    directory = str(recipes.dir)  # type: ignore[attr-defined]
    keys = []
    for extra in ([], ["--x=100"], ["--x=100.0"]):
        result = cli("plan", "--tags=typed", "--recipes", directory, "--json", *extra)
        assert result.code == 0, result.err
        node = json.loads(result.out)["nodes"][0]
        assert node["inputs"]["x"] == 100 and isinstance(node["inputs"]["x"], int)
        assert node["steps"][0]["rendered"]["cmd"] == ["echo", 100]
        keys.append(node["cache"]["key"])
    assert len(set(keys)) == 1
    half = json.loads(cli("plan", "--tags=typed", "--recipes", directory, "--json", "--x=2.5").out)
    assert half["nodes"][0]["inputs"]["x"] == 2.5


def test_a_list_default_for_a_string_input_is_a_load_error(cli: Callable[..., Any],
                                                           recipes: Callable[[str, str], Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    recipes("listy", "name: listy\ntags: [listy]\nsummary: x\ninputs:\n  s: {type: string, default: [a, b]}\n")
    result = cli("plan", "--tags=listy", "--recipes", str(recipes.dir))  # type: ignore[attr-defined]
    assert result.code == 2 and "listy.yaml:5" in result.err and "expects string, got ['a', 'b']" in result.err


def test_a_broken_file_harms_only_the_commands_that_need_it(cli: Callable[..., Any],
                                                            recipes: Callable[[str, str], Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI means --strict
    recipes("broken", "name: broken\ntags: [broken\nsummary: x\n")
    directory = str(recipes.dir)  # type: ignore[attr-defined]
    fine = cli("run", "recipe", "--tags=demo,sort", "--recipes", directory, "--json")
    assert fine.code == 0 and json.loads(fine.out)["status"] == "valid"
    assert fine.err_lines[0].startswith("cmx: warning: skipped a broken recipe file: ") and "broken.yaml:" in fine.err
    needed = cli("plan", "--tags=broken", "--recipes", directory)
    assert needed.code == 2 and len(needed.err_lines) == 1
    assert "no recipe has any of the tags 'broken'" in needed.err and "broken.yaml:" in needed.err
    monkeypatch.setenv("CI", "true")
    assert cli("plan", "--tags=demo,sort", "--recipes", directory).code == 2


def test_a_corrupt_results_store_is_reported_before_the_run(cli: Callable[..., Any], cmx_home: Path) -> None:
    from cmx_core import paths

    db = paths.results_db()
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    runs_before = list(paths.runs_dir().glob("*")) if paths.runs_dir().exists() else []
    result = cli("run", "recipe", "--tags=demo,sort")
    assert result.code == 2 and len(result.err_lines) == 1
    assert "not a readable cmx results database" in result.err and "cmx results reindex" in result.err
    after = list(paths.runs_dir().glob("*")) if paths.runs_dir().exists() else []
    assert after == runs_before  # nothing ran, no run directory was made
