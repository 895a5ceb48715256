"""Issue 28 (e): what the plan can know is refused at plan time, before a run directory
exists: a step timeout that is not positive, a python step whose function does not exist, a
template mistake; a dep's query error names the file, line and key that asked; a tag listed
twice in a recipe and an input given twice with two values are errors, a tag repeated in
``--tags`` and an input repeated with one value are warnings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HEAD = "name: r\ntags: [r]\nsummary: s\n"


def _runs(home: Path) -> list[Path]:
    runs = home / "data" / "runs"
    return sorted(runs.iterdir()) if runs.is_dir() else []


def _refused(cli: Callable[..., Any], directory: Path, home: Path, *expected: str, tags: str = "r") -> str:
    result = cli("run", "recipe", "--recipes", directory, f"--tags={tags}")
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    errors = [line for line in result.err_lines if line.startswith("cmx: error:")]
    assert len(errors) == 1, result.err
    for text in expected:
        assert text in errors[0], errors[0]
    assert _runs(home) == []  # refused before a run directory was made
    return errors[0]


@pytest.mark.parametrize(("steps", "expected"), [
    ("  - {uses: shell, timeout_s: -1, with: {cmd: ['true']}}\n",
     ["r.yaml:5", "steps.0.timeout_s", "must be a positive number of seconds, got -1"]),
    ("  - {uses: shell, timeout_s: 0, with: {cmd: ['true']}}\n", ["steps.0.timeout_s", "got 0"]),
    ("  - {uses: python, with: {function: 'no_such_module_anywhere:f'}}\n",
     ["r.yaml:5", "steps.0.with.function", "no module named 'no_such_module_anywhere'"]),
    ("  - {uses: python, with: {function: 'cmx_core.builtin.demo:no_such_function'}}\n",
     ["steps.0.with.function", "demo.py defines no 'no_such_function'"]),
    ("  - {uses: python, with: {function: 'cmx_core.no_such_sub:f'}}\n", ["no module named 'cmx_core.no_such_sub'"]),
    ("  - {uses: python, with: {function: 'helper:missing'}}\n", ["helper.py defines no 'missing'"]),
    ("  - {uses: shell, with: {cmd: [echo, '{{ 1 | no_such_filter }}']}}\n",
     ["r.yaml:5", "steps.0.with.cmd[1]", "No filter named 'no_such_filter'"]),
    ("  - {uses: shell, with: {cmd: [echo, '{% if 1 is no_such_test %}x{% endif %}']}}\n",
     ["steps.0.with.cmd[1]", "No test named 'no_such_test'"]),
], ids=["negative-timeout", "zero-timeout", "no-module", "no-function", "no-submodule", "no-local-function",
        "unknown-filter", "unknown-test"])
def test_refused_at_plan_time(steps: str, expected: list[str], cli: Any, tmp_path: Path, cmx_home: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    (directory / "r.yaml").write_text(HEAD + "steps:\n" + steps)
    (directory / "helper.py").write_text("def present(ctx):\n    return {}\n")
    _refused(cli, directory, cmx_home, *expected)


def test_python_steps_that_exist_still_plan(cli: Any, tmp_path: Path, cmx_home: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    (directory / "helper.py").write_text("if True:\n    def present(ctx):\n        return {'v': 1}\n")
    (directory / "r.yaml").write_text(HEAD + "steps:\n  - {uses: python, with: {function: 'helper:present'}}\n"
                                      "  - {uses: python, with: {function: 'os.path:join'}}\n"
                                      "  - {uses: python, with: {function: 'cmx_core.builtin.demo:make_data'}}\n")
    result = cli("plan", "--recipes", directory, "--tags=r")
    assert result.code == 0, result.err


def test_a_dep_query_error_names_the_file_line_and_key(cli: Any, tmp_path: Path, cmx_home: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    (directory / "ok.yaml").write_text("name: ok\ntags: [ok]\nsummary: s\n")
    (directory / "r.yaml").write_text(HEAD + "deps:\n  - {tags: [ok]}\n  - {tags: [ok, nowhere], as: two}\n")
    line = _refused(cli, directory, cmx_home, "r.yaml:6: deps.1.tags:", "no recipe matches tags 'ok,nowhere'")
    assert line.count("r.yaml:6") == 1


def test_a_tag_listed_twice_in_a_recipe_is_an_error(cli: Any, tmp_path: Path, cmx_home: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    (directory / "r.yaml").write_text("name: r\ntags: [r, x, r]\nsummary: s\n")
    result = cli("plan", "--strict", "--recipes", directory, "--tags=x")
    assert result.code == 2 and "r.yaml:2: tags[2]: tag 'r' is listed twice" in result.err


def test_repeated_tags_and_inputs_on_the_command_line(cli: Any, tmp_path: Path, cmx_home: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    (directory / "r.yaml").write_text(HEAD + "inputs:\n  n: {type: integer, default: 1}\n")
    warned = cli("plan", "--recipes", directory, "--tags=r,r")
    assert warned.code == 0 and "cmx: warning: --tags lists 'r' more than once" in warned.err
    same = cli("plan", "--recipes", directory, "--tags=r", "--n=2", "--input.n=2")
    assert same.code == 0 and "cmx: warning: input 'n' is given twice (both '2')" in same.err
    two = cli("plan", "--recipes", directory, "--tags=r", "--n=2", "--n=3")
    assert two.code == 2 and "input 'n' is given twice, as '2' and '3'; give it once" in two.err
