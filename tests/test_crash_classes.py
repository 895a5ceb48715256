"""Each crash class of issue 28 is one line on stderr, exit 2, naming the file or key, with
no traceback and no hang: hostile JSON and lock files, state directories that are files,
templates that ask for huge ranges or strings, a FIFO or a symlink to / in a recipe
directory. Process tests are bounded by a timeout; none asserts a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core.datautil import MAX_JSON_BYTES, MAX_JSON_DEPTH, JSONLimitError, loads_bounded

OK = "name: ok\ntags: [ok]\nsummary: fine\nsteps:\n  - {uses: shell, with: {cmd: [\"true\"]}}\n"


def _cmx(*args: str | Path, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # CI set means strict mode (a broken recipe file is an error): these tests give --strict where they mean it
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "CMX_STRICT")}
    return subprocess.run([sys.executable, "-m", "cmx_core", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**base, **(env or {})}, stdin=subprocess.DEVNULL)


def _one_error(proc: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cmx: error:")]
    assert len(errors) == 1, proc.stderr
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    directory = tmp_path / "recipes"
    directory.mkdir()
    (directory / "ok.yaml").write_text(OK)
    return directory


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_json_inputs_have_depth_and_size_limits() -> None:
    assert (MAX_JSON_BYTES, MAX_JSON_DEPTH) == (64 << 20, 100)  # as docs/recipes.md says
    assert loads_bounded(json.dumps({"a": [[1]]})) == {"a": [[1]]}
    for levels in (MAX_JSON_DEPTH + 1, 50_000):  # under and over the recursion limit
        with pytest.raises(JSONLimitError, match=f"nests deeper than {MAX_JSON_DEPTH}"):
            loads_bounded(_deep(levels))
    with pytest.raises(JSONLimitError, match="larger than 10 bytes"):
        loads_bounded("[" + "1," * 10 + "1]", max_bytes=10)


def test_a_facts_file_nested_thousands_deep(recipes: Path, tmp_path: Path, cmx_home: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"facts": {"os": ' + _deep(20_000) + "}}")
    _one_error(_cmx("plan", "--recipes", recipes, "--tags=ok", "--facts", facts),
               f"--facts {facts}", "nests deeper than")


def test_a_cached_fact_nested_thousands_deep_is_detected_again(recipes: Path, cmx_home: Path) -> None:
    assert _cmx("run", "recipe", "--recipes", recipes, "--tags=ok").returncode == 0
    cached = list((cmx_home / "cache" / "facts").glob("*.json"))
    assert cached
    for path in cached:
        path.write_text('{"value": ' + _deep(20_000) + "}")
    proc = _cmx("run", "recipe", "--recipes", recipes, "--tags=ok", env={"CMX_NO_REPLAY": "1"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.fixture
def lock(recipes: Path, cmx_home: Path) -> Path:
    proc = _cmx("run", "recipe", "--recipes", recipes, "--tags=ok")
    assert proc.returncode == 0, proc.stderr
    [path] = (cmx_home / "data" / "runs").glob("*/lock.json")
    return path


@pytest.mark.parametrize(("change", "key"), [
    (lambda d: d["nodes"][0].__setitem__("inputs", [1]), "nodes[0].inputs must be an object, not a list"),
    (lambda d: d.__setitem__("plugins", "all"), "plugins must be a list, not a string"),
    (lambda d: d["query"].__setitem__("tags", [1]), "query.tags[0] must be a string, not the number 1"),
    (lambda d: d["nodes"][0].pop("id"), "nodes[0].id is missing"),
    (lambda d: d["plugins"].append({"version": "1"}), "distribution is missing"),
    (lambda d: d.__setitem__("nodes", [[]]), "nodes[0] must be an object, not a list"),
], ids=["node-inputs", "plugins", "query-tags", "node-id", "plugin-name", "node-list"])
def test_a_lock_of_the_wrong_shape(lock: Path, tmp_path: Path, change, key: str) -> None:
    doc = json.loads(lock.read_text())
    change(doc)
    bad = tmp_path / "bad.lock"
    bad.write_text(json.dumps(doc))
    _one_error(_cmx("run", "--lock", bad), f"--lock {bad}: not a cmx lockfile", key)


def test_a_lock_nested_thousands_deep(tmp_path: Path, cmx_home: Path) -> None:
    bad = tmp_path / "deep.lock"
    bad.write_text('{"query": {"tags": ["ok"]}, "nodes": ' + _deep(20_000) + "}")
    _one_error(_cmx("run", "--lock", bad), f"--lock {bad}", "nests deeper than")


def test_cmx_home_or_the_cache_dir_being_a_file(recipes: Path, tmp_path: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("")
    line = _one_error(_cmx("run", "recipe", "--recipes", recipes, "--tags=ok", env={"CMX_HOME": str(home)}),
                      str(home), "Not a directory", "make it a writable directory")
    assert "corrupt" not in line
    cache = tmp_path / "cache-file"
    cache.write_text("")
    _one_error(_cmx("plan", "--recipes", recipes, "--tags=ok",
                    env={"CMX_HOME": str(tmp_path / "h"), "CMX_CACHE_DIR": str(cache)}), str(cache))


def test_the_staging_dir_being_a_file(recipes: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "staging").write_text("")
    proc = _cmx("run", "recipe", "--recipes", recipes, "--tags=ok", env={"CMX_HOME": str(home)})
    _one_error(proc, str(home / "cache" / "staging"), "File exists")
    assert "running" not in proc.stderr and not (home / "data" / "runs").exists()  # refused before the run


def test_the_runs_dir_being_a_file_or_read_only(recipes: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "runs").write_text("")
    _one_error(_cmx("run", "recipe", "--recipes", recipes, "--tags=ok", env={"CMX_HOME": str(home)}),
               "the run directory", "cannot create it: Not a directory")
    if os.geteuid() == 0:
        return  # root writes into a read-only directory anyway
    (home / "data" / "runs").unlink()
    (home / "data" / "runs").mkdir(mode=0o555)
    _one_error(_cmx("run", "recipe", "--recipes", recipes, "--tags=ok", env={"CMX_HOME": str(home)}),
               "the run directory", "Permission denied")


def test_an_output_whose_parent_is_missing_or_a_file(recipes: Path, tmp_path: Path, cmx_home: Path) -> None:
    made = tmp_path / "new" / "deeper" / "out"
    proc = _cmx("run", "recipe", "--recipes", recipes, "--tags=ok", "--output", made)
    assert proc.returncode == 0 and (made / "result.json").is_file(), proc.stderr  # missing parents are made
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _one_error(_cmx("run", "recipe", "--recipes", recipes, "--tags=ok", "--output", blocker / "out"),
               f"--output {blocker / 'out'}: cannot create it: Not a directory")


@pytest.mark.parametrize(("template", "said"), [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop budget"),
    ("{{ range(10 ** 12) | list }}", "loop budget"),
    ("{{ 'x' * 1000000000000 }}", "repeated 1,000,000,000,000 times"),
    ("{{ [1, 2] * 10 ** 9 }}", "a list of 2 repeated"),
    ("{{ 'x'.ljust(10 ** 10) }}", "ljust(10000000000) asks for too long a string"),
    ("{{ 'x' | center(10 ** 10) }}", "center(10,000,000,000) is too wide"),
    ("{{ 7 ** 100000000 }}", "7 ** 100000000 is too large a number"),
    ("{% for i in range(99999) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}", "rendered text is too long"),
], ids=["nested-range", "huge-range", "repeat-string", "repeat-list", "ljust", "center", "power", "output"])
def test_templates_with_huge_ranges_or_strings(template: str, said: str, tmp_path: Path, cmx_home: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    (directory / "t.yaml").write_text("name: t\ntags: [t]\nsummary: t\nsteps:\n"
                                      f"  - {{uses: shell, with: {{cmd: [echo, {json.dumps(template)}]}}}}\n")
    _one_error(_cmx("run", "recipe", "--recipes", directory, "--tags=t"), "t.yaml", "steps.0.with.cmd[1]", said)


def test_templates_within_the_bounds_still_render() -> None:
    from cmx_core.recipes.template import MAX_TEMPLATE_CHARS, MAX_TEMPLATE_ITEMS, render_value

    assert (MAX_TEMPLATE_ITEMS, MAX_TEMPLATE_CHARS) == (100_000, 1_000_000)  # as docs/recipes.md says

    value = render_value(["{{ 'ab' * 3 }}", "{% for i in range(3) %}{{ i }}{% endfor %}", "{{ 2 ** 10 }}"],
                         {}, "with")
    assert value == ["ababab", "012", 1024]


def test_a_fifo_named_yaml_is_not_read(recipes: Path, cmx_home: Path) -> None:
    os.mkfifo(recipes / "pipe.yaml")
    proc = _cmx("list", "recipes", "--recipes", recipes, timeout=120)  # reading it would block forever
    assert "Traceback" not in proc.stderr and "ok" in proc.stdout, proc.stderr  # the others are listed
    assert "pipe.yaml: cannot read: not a regular file" in proc.stderr
    _one_error(_cmx("plan", "--strict", "--recipes", recipes, "--tags=ok"), "pipe.yaml", "not a regular file")


def test_a_symlink_to_root_or_a_loop_in_a_recipe_dir(recipes: Path, tmp_path: Path, cmx_home: Path) -> None:
    (recipes / "everything").symlink_to("/")
    (recipes / "loop").symlink_to(recipes)  # inside the root: entered once, by device and inode
    outside = tmp_path / "outside.yaml"
    outside.write_text(OK.replace("ok", "far"))
    (recipes / "far.yaml").symlink_to(outside)
    (recipes / "sub").mkdir()
    (recipes / "sub" / "near.yaml").write_text(OK.replace("ok", "near"))
    (recipes / "near-link.yaml").symlink_to(recipes / "sub" / "near.yaml")
    proc = _cmx("list", "recipes", "--recipes", recipes, timeout=120)  # a walk of / would not end in time
    assert "Traceback" not in proc.stderr and "near" in proc.stdout and " far " not in proc.stdout, proc.stderr
    assert "far.yaml: cannot read: a symlink out of the recipe directory" in proc.stderr
    assert "everything: cannot read: a directory symlink out of the recipe directory" in proc.stderr  # #49
    _one_error(_cmx("plan", "--strict", "--recipes", recipes, "--tags=ok"), "everything", "a directory symlink out")
    (recipes / "everything").unlink()
    _one_error(_cmx("plan", "--strict", "--recipes", recipes, "--tags=ok"), "far.yaml", "out of the recipe directory")
    (recipes / "far.yaml").unlink()
    proc = _cmx("plan", "--recipes", recipes, "--tags=near", timeout=120)
    assert proc.returncode == 0 and "near" in proc.stdout, proc.stderr


def test_control_characters_in_an_error_are_escaped(recipes: Path, cmx_home: Path) -> None:
    line = _one_error(_cmx("plan", "--recipes", recipes, "--tags=bad\x1b[2Jtag\x07"), "no recipe has any of the tags")
    assert "\x1b" not in line and "\x07" not in line
    assert "bad\\x1b[2Jtag\\x07" in line


def test_a_result_file_nested_thousands_deep_is_skipped_by_reindex(tmp_path: Path, cmx_home: Path) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "result.json").write_text('{"run_id": ' + _deep(20_000) + "}")
    proc = _cmx("results", "reindex", tmp_path / "runs")
    assert "Traceback" not in proc.stderr and "nests deeper than" in proc.stderr, proc.stderr


def test_control_characters_in_a_warning_are_escaped(recipes: Path, cmx_home: Path) -> None:
    (recipes / "bad\x1b[2Jname.yaml").write_text("name: [unclosed\n")
    proc = _cmx("plan", "--recipes", recipes, "--tags=ok")
    assert proc.returncode == 0, proc.stderr
    [warning] = [line for line in proc.stderr.splitlines() if "skipped a broken recipe file" in line]
    assert "\x1b" not in warning and "bad\\x1b[2Jname.yaml" in warning
