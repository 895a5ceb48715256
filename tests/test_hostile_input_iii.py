"""Engine hardening III (#49): errors found at plan time, nothing silently accepted, bounded
reads, nothing raw on the terminal. Each test names the class of the issue it covers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.errors import escape_controls
from cmx_core.run.stop_points import POINTS, STOP_ENV

BOMB = """
name: bomb
tags: [bomb]
summary: a template that passes a bound
inputs:
  n: {{type: number, default: 10}}
steps:
  - uses: shell
    with: {{cmd: [echo, "{template}"]}}
"""

BOMBS = [
    "{{ 'x' * 10**9 }}",
    "{% for i in range(10**9) %}{% endfor %}",
    "{% for i in range(1000) %}{% for j in range(1000) %}{{ node.dir }}{% endfor %}{% endfor %}",
    "{{ 'ab' | center(10**8) }}",
]


@pytest.mark.parametrize("template", BOMBS)
def test_a_template_past_a_bound_fails_the_plan_as_it_fails_the_run(
        template: str, cli: Callable[..., Any], recipes: Callable[[str, str], Path]) -> None:
    """Class 1: ``cmx plan`` exited 0 and ``cmx run`` 2 after recording a run directory."""
    path = recipes("bomb", BOMB.format(template=template))
    directory = str(path.parent)
    planned = cli("plan", "--tags=bomb", "--recipes", directory)
    assert planned.code == 2 and len(planned.err_lines) == 1, planned.err
    assert f"{path}:8: steps.0.with.cmd[1]:" in planned.err and "a template may build at most" in planned.err


def test_a_bound_reached_through_an_input_fails_the_plan(cli: Callable[..., Any],
                                                         recipes: Callable[[str, str], Path]) -> None:
    path = recipes("bomb", BOMB.format(template="{% for i in range(inputs.n) %}{% endfor %}"))
    directory = str(path.parent)
    assert cli("plan", "--tags=bomb", "--recipes", directory).code == 0
    big = cli("plan", "--tags=bomb", "--recipes", directory, "--n=2000000")
    assert big.code == 2 and "range(2000000) goes past the template's loop budget" in big.err


HOSTILE = """
name: hostile
tags: [hostile]
summary: "\\e]0;pwned\\a title \\u202e evil \\u200b hidden"
steps:
  - uses: shell
    with: {cmd: [echo, "\\e[2J"]}
"""


def test_text_from_a_recipe_never_reaches_the_terminal_raw(cli: Callable[..., Any],
                                                          recipes: Callable[[str, str], Path]) -> None:
    """Class 7: ``cmx list recipes | cat -v`` showed ``^[]0;pwned^G``; a summary's bidi override
    and zero-width space were printed raw, as were error messages quoting them."""
    directory = str(recipes("hostile", HOSTILE).parent)
    outputs = [cli("list", "recipes", "--recipes", directory, "--wide").out,  # whole summaries
               cli("show", "recipe", "hostile", "--recipes", directory).out,
               cli("plan", "--tags=hostile", "--recipes", directory).out,
               cli("plan", "--tags=hostile\u202e", "--recipes", directory).err]
    for text in outputs:
        assert not {"\x1b", "\x07", "\u202e", "\u200b"} & set(text), text
    listed = outputs[0]
    assert "\\x1b]0;pwned\\x07" in listed and "\\u202e" in listed and "\\u200b" in listed
    assert "[2J" in outputs[2]
    assert "\\u202e" in outputs[3]


def test_the_escape_covers_controls_bidi_and_zero_width() -> None:
    text = "".join(map(chr, (0x1B, 0x07, 0x7F, 0x9B, 0x200B, 0x200F, 0x202A, 0x202E, 0x2066, 0x2069, 0xFEFF)))
    assert escape_controls(f"ok\t{text}é\n") == ("ok\t\\x1b\\x07\\x7f\\x9b\\u200b\\u200f\\u202a\\u202e\\u2066"
                                                 "\\u2069\\ufeffé\n")


@pytest.mark.parametrize("option", ["--facts", "--lock"])
def test_an_endless_input_file_is_refused_after_a_bounded_read(option: str, tmp_path: Path, cmx_home: Path) -> None:
    """Class 6: ``--facts /dev/zero`` and ``--lock /dev/zero`` were read whole before the size
    check: a MemoryError traceback, or cmx SIGKILLed. Under a 1 GiB address-space limit the
    bounded read is one line and exit 2."""
    command = ["plan", "--tags=demo-sort", "--facts", "/dev/zero"] if option == "--facts" else \
        ["run", "--lock", "/dev/zero"]
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
    proc = subprocess.run([sys.executable, "-c", limit + "from cmx_core.cli.main import main; raise SystemExit(main())",
                           *command], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"cmx: error: {option} /dev/zero: refused: the file larger than 67,108,864 bytes"



RECIPE = """
name: {name}
tags: [{name}]
summary: a plain recipe
steps:
  - uses: shell
    with: {{cmd: [echo, hi]}}
"""


def test_a_directory_symlink_out_of_the_recipe_folder_is_warned_about(
        cli: Callable[..., Any], recipes: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Class 8: a directory link out of the folder holding a valid recipe was silently ignored,
    where a file link got a warning. It is still not walked."""
    monkeypatch.delenv("CI", raising=False)  # CI means --strict: the warning is an error there
    monkeypatch.delenv("CMX_STRICT", raising=False)
    directory = recipes("near", RECIPE.format(name="near")).parent
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "far.yaml").write_text(RECIPE.format(name="far"))
    (directory / "elsewhere").symlink_to(outside)
    planned = cli("plan", "--tags=near", "--recipes", str(directory))
    assert planned.code == 0 and planned.err_lines == [
        f"cmx: warning: skipped a broken recipe file: {directory / 'elsewhere'}: cannot read: a directory symlink out "
        f"of the recipe directory {directory}; its recipes are not read (a symlink to {outside}); fix or remove "
        "the link (--strict makes this an error)"]
    assert cli("plan", "--tags=far", "--recipes", str(directory)).code == 2


def test_two_recipes_of_one_name_in_a_directory_are_an_error(cli: Callable[..., Any],
                                                            recipes: Callable[[str, str], Path]) -> None:
    """Class 3: one of them was taken with a warning and exit 0."""
    first = recipes("a", RECIPE.format(name="twin"))
    second = recipes("b", RECIPE.format(name="twin"))
    for command in (["plan", "--tags=twin"], ["run", "--tags=twin"], ["explain", "--tags=twin"]):
        result = cli(*command, "--recipes", str(first.parent))
        assert result.code == 2 and str(first) in result.err and str(second) in result.err, result.err


@pytest.mark.parametrize(("body", "line", "expected"), [
    ("summary: |\n  first\n  second\n", 3, "summary: expected one line of text, got several"),
    ("summary: s\nversion: 1.10\n", 4, "version: version 1.10 is written as a number (YAML reads 1.1); quote it"),
    ("summary: s\ndeps:\n  - tags: [demo, 1]\n", 5, "deps.0.tags[1]: tag 1 is written as a number; quote it ('1')"),
    ("summary: one\ninputs:\n  n: {type: number, default: 1}\nvariations:\n  size: {inputs: {n: \"#\"}}\n", 7,
     "variations.size.inputs.n: '#' is the value of a parametric variation, but 'size' has no '.#'"),
])
def test_a_field_written_in_the_wrong_shape_is_a_one_line_error(
        body: str, line: int, expected: str, cli: Callable[..., Any], recipes: Callable[[str, str], Path]) -> None:
    """Class 2: a multi-line summary, a version or tag YAML reads as a number, and a variation
    setting ``#`` without being parametric were taken as written (a broken table row; the
    literal text ``#`` as the input)."""
    steps = "steps:\n  - uses: shell\n    with: {cmd: [echo]}\n"
    path = recipes("shape", "name: shape\ntags: [shape]\n" + body + steps)
    result = cli("plan", "--tags=shape", "--recipes", str(path.parent), "--strict")
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert f"{path}:{line}: {expected}" in result.err


def test_a_recipes_path_entry_that_does_not_exist_is_named(cli: Callable[..., Any], tmp_path: Path, cmx_home: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Class 2: ``CMX_RECIPES_PATH=/typo`` read nothing, silently (a warning: the variable is
    lenient like ``PATH``)."""
    missing = tmp_path / "no-such-dir"
    monkeypatch.setenv("CMX_RECIPES_PATH", str(missing))
    result = cli("plan", "--tags=demo,sort")
    assert result.code == 0 and result.err_lines == [
        f"cmx: warning: CMX_RECIPES_PATH entry {missing} is not a directory; no recipes are read from it "
        "(fix or remove it)"]


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def _kill_when_stopped(proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120  # a bound for a broken build, not a timing assumption
    while not _stopped(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.kill()  # SIGKILL by PID, from outside: no handler of cmx runs
    proc.wait(timeout=60)


def test_every_run_directory_a_kill_leaves_is_recorded(recipes: Callable[[str, str], Path], cmx_home: Path) -> None:
    """Class 4: a kill between the run directory's creation and the in-flight marker left a
    directory with only plan.json and lock.json that nothing recorded. Each start-up point is
    hit exactly (cmx stops itself there: CMX_STOP_AT), and a few kills land as soon as a run
    directory appears; then `cmx results reindex` must leave every directory recorded."""
    directory = str(recipes("quick", RECIPE.format(name="quick")).parent)
    command = [sys.executable, "-m", "cmx_core", "run", "--tags=quick", "--recipes", directory]
    for point in (*POINTS, *POINTS):
        proc = subprocess.Popen(command, env={**os.environ, STOP_ENV: point},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _kill_when_stopped(proc)
    runs = paths.runs_dir()
    for _ in range(3):
        before = set(runs.iterdir()) if runs.is_dir() else set()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and \
                not (runs.is_dir() and set(runs.iterdir()) - before):
            time.sleep(0.001)
        proc.kill()
        proc.wait(timeout=60)
    reindex = subprocess.run([sys.executable, "-m", "cmx_core", "results", "reindex"], capture_output=True,
                             text=True, timeout=300, check=False)
    assert reindex.returncode == 0, reindex.stderr
    left = sorted(runs.iterdir())
    assert len(left) >= 2 * (len(POINTS) - 1)  # every point after the marker left a directory
    listed = subprocess.run([sys.executable, "-m", "cmx_core", "results", "list", "--json", "--limit=0"],
                            capture_output=True, text=True, timeout=300, check=True)
    recorded = {str(run["run_id"]) for run in json.loads(listed.stdout)["runs"]}
    for run_dir in left:
        document = json.loads((run_dir / "result.json").read_text())
        assert document["run_id"] in recorded, run_dir
        if document["status"] == "error":
            assert "interrupted" in document["error"]["message"], document["error"]


def test_cmx_list_recipes_through_cat_v_shows_the_escape_escaped(recipes: Callable[[str, str], Path],
                                                                cmx_home: Path) -> None:
    """The issue's must-show, through a real pipe: ``cat -v`` showed ``^[]0;pwned^G``."""
    directory = recipes("hostile", HOSTILE).parent
    line = (f"{shlex.quote(sys.executable)} -m cmx_core list recipes --wide --recipes {shlex.quote(str(directory))}"
            " | cat -v")
    proc = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=120, check=True)
    assert "^[" not in proc.stdout and "^G" not in proc.stdout
    assert "\\x1b]0;pwned\\x07" in proc.stdout and "\\u202e" in proc.stdout
