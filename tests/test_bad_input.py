"""Bad input: each case gives one line naming the file/line/key or the thing at fault,
exit code 2 (1 for a failed step), no traceback, and nothing half-written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

OK = """
name: ok
tags: [ok]
summary: fine
steps:
  - {uses: shell, with: {cmd: ["true"]}}
"""

# (id, {file: text}, extra CLI args, exit code, substrings of the error line)
CASES = [
    ("malformed-yaml", {"r": "name: r\ntags: [a\nsummary: x\n"}, ["--tags=a"], 2, ["r.yaml:", "malformed YAML"]),
    ("empty-file", {"r": ""}, ["--tags=a"], 2, ["r.yaml", "empty"]),
    ("wrong-type-tags", {"r": "name: r\ntags: {a: 1}\nsummary: x\n"}, ["--tags=a"], 2,
     ["r.yaml:2", "tags", "list of tags"]),
    ("unknown-top-key", {"r": "name: r\ntags: [a]\nsummary: x\nstepz: []\n"},
     ["--tags=a"], 2, ["r.yaml:4", "stepz", "unknown key"]),
    ("unknown-nested-key", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n  n: {type: integer, dflt: 3}\n"},
     ["--tags=a"], 2, ["r.yaml:5", "inputs.n.dflt"]),
    ("missing-summary", {"r": "name: r\ntags: [a]\n"}, ["--tags=a"], 2, ["r.yaml:1", "summary"]),
    ("bad-name", {"r": "name: Bad Name\ntags: [a]\nsummary: x\n"}, ["--tags=a"], 2, ["r.yaml:1", "name"]),
    ("unknown-input-type", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n  n: {type: float}\n"},
     ["--tags=a"], 2, ["r.yaml:5", "inputs.n.type", "float"]),
    ("bad-default", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n  n: {type: integer, default: abc}\n"},
     ["--tags=a"], 2, ["r.yaml:5", "inputs.n.default", "integer"]),
    ("choice-without-choices", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n  s: {type: choice}\n"},
     ["--tags=a"], 2, ["inputs.s.choices"]),
    ("duplicate-step-id", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n  - {uses: shell, id: s}\n"
                                "  - {uses: shell, id: s}\n"},
     ["--tags=a"], 2, ["r.yaml:6", "steps.1.id", "duplicate"]),
    ("when-syntax", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n  - {tags: [ok], when: \"inputs.n >\"}\n"},
     ["--tags=a"], 2, ["r.yaml:5", "deps.0.when", "syntax"]),
    ("when-calls", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n"
                         "  - {tags: [ok], when: \"__import__('os').system('true')\"}\n"},
     ["--tags=a"], 2, ["deps.0.when", "calls are not allowed"]),
    ("when-dunder", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n  - {tags: [ok], when: \"inputs.__class__\"}\n"},
     ["--tags=a"], 2, ["deps.0.when", "__class__"]),
    ("when-lambda", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n  - {tags: [ok], when: \"(lambda: 1)\"}\n"},
     ["--tags=a"], 2, ["deps.0.when", "Lambda"]),
    ("when-unknown-name", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n"
                                "  - {tags: [ok], when: \"secrets == 1\"}\n", "ok": OK},
     ["--tags=a"], 2, ["r.yaml:5", "unknown name 'secrets'"]),
    ("bad-version-range", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n  - {tags: [ok], version: \"=>1\"}\n"},
     ["--tags=a"], 2, ["deps.0.version", "invalid version range"]),
    ("bad-cache-expiry", {"r": "name: r\ntags: [a]\nsummary: x\ncache: {expires: soon}\n"},
     ["--tags=a"], 2, ["cache.expires", "duration"]),
    ("unknown-step-type", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n  - {uses: nope.step}\n"},
     ["--tags=a"], 2, ["r.yaml:5", "nope.step"]),
    ("unknown-step-param", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n  - {uses: shell, with: {cmdd: [true]}}\n"},
     ["--tags=a"], 2, ["steps.0.with.cmdd", "shell"]),
    ("unknown-tags", {"ok": OK}, ["--tags=nothing,here"], 2, ["no recipe has any of the tags 'nothing,here'"]),
    ("no-match-lists-candidates", {"ok": OK}, ["--tags=ok,gpu"], 2, ["ok: lacks tag 'gpu'"]),
    ("ambiguous-tags", {"a1": "name: a1\ntags: [a, one]\nsummary: x\n", "a2": "name: a2\ntags: [a, two]\nsummary: x\n"},
     ["--tags=a"], 2, ["match 2 recipes", "a1", "a2"]),
    ("conflicting-variations", {"r": "name: r\ntags: [a]\nsummary: x\nvariations:\n  cpu: {group: dev, default: true}\n"
                                     "  gpu: {group: dev}\n"},
     ["--tags=a,cpu,gpu"], 2, ["conflicting variations 'cpu' and 'gpu'", "dev"]),
    ("two-defaults-in-group", {"r": "name: r\ntags: [a]\nsummary: x\nvariations:\n  cpu: {group: dev, default: true}\n"
                                    "  gpu: {group: dev, default: true}\n"},
     ["--tags=a"], 2, ["variations.gpu.default", "already has default"]),
    ("cycle", {"x": "name: x\ntags: [x]\nsummary: x\ndeps: [{tags: [y]}]\n",
               "y": "name: y\ntags: [y]\nsummary: y\ndeps: [{tags: [z]}]\n",
               "z": "name: z\ntags: [z]\nsummary: z\ndeps: [{tags: [x]}]\n"},
     ["--tags=x"], 2, ["dependency cycle: x -> y -> z -> x"]),
    ("version-unsatisfied", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n"
                                  "  - {tags: [ok], version: \">=2\"}\n", "ok": OK},
     ["--tags=a"], 2, ["deps.0.version", "ok 0 does not satisfy '>=2'"]),
    ("duplicate-alias", {"r": "name: r\ntags: [a]\nsummary: x\ndeps:\n  - {tags: [ok]}\n"
                              "  - {tags: [ok], as: ok}\n", "ok": OK},
     ["--tags=a"], 2, ["alias 'ok'"]),
    ("input-wrong-type", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n  n: {type: integer, default: 1}\n"},
     ["--tags=a", "--n=abc"], 2, ["input 'n' expects integer, got 'abc'"]),
    ("input-out-of-range", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n"
                                 "  n: {type: integer, default: 1, max: 10}\n"},
     ["--tags=a", "--input.n=11"], 2, ["input 'n' = 11 is above the maximum 10"]),
    ("input-not-a-choice", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n"
                                 "  s: {type: choice, choices: [A, B], default: A}\n"},
     ["--tags=a", "--s=C"], 2, ["input 's' = 'C' is not one of: A, B"]),
    ("unknown-input", {"ok": OK}, ["--tags=ok", "--input.nope=1"], 2, ["unknown input 'nope' for recipe ok"]),
    ("missing-required-input", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n  p: {type: path, required: true}\n"},
     ["--tags=a"], 2, ["needs input 'p'", "--p=VALUE"]),
    ("conflict-with-variation-input", {"r": "name: r\ntags: [a]\nsummary: x\ninputs:\n"
                                            "  n: {type: integer, default: 1}\n"
                                        "variations:\n  big: {inputs: {n: 100}}\n"},
     ["--tags=a,big", "--n=5"], 2, ["conflicts with variation 'big'"]),
    ("variation-sets-undeclared-input", {"r": "name: r\ntags: [a]\nsummary: x\nvariations:\n"
                                              "  big: {inputs: {n: 100}}\n"},
     ["--tags=a"], 2, ["variations.big.inputs.n", "does not declare"]),
    ("requires-unsatisfied", {"r": "name: r\ntags: [a]\nsummary: x\nrequires: {os.name: plan9}\n"},
     ["--tags=a"], 2, ["requires os.name plan9; this machine has: linux"]),
    ("shell-cmd-string", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n"
                               "  - {uses: shell, with: {cmd: \"echo hi; rm -rf /\"}}\n"},
     ["--tags=a"], 2, ["steps.0.with.cmd must be a list, not a string", "list of arguments", "[sh, -c"]),
    ("template-unknown-name", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n"
                                    "  - {uses: shell, with: {cmd: [echo, \"{{ inputs.nope }}\"]}}\n"},
     ["--tags=a"], 2, ["steps.0.with", "nope"]),
    ("template-sandbox", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n"
                               "  - {uses: shell, with: {cmd: [echo, \"{{ ''.__class__.__mro__ }}\"]}}\n"},
     ["--tags=a"], 2, ["steps.0.with.cmd[1]", "private attributes"]),
    ("bad-jobs", {"ok": OK}, ["--tags=ok", "-j", "abc"], 2, ["argument -j/--jobs: invalid int value"]),
    ("zero-jobs", {"ok": OK}, ["--tags=ok", "-j", "0"], 2, ["-j must be at least 1"]),
    ("stray-argument", {"ok": OK}, ["--tags=ok", "oops"], 2, ["unrecognized argument 'oops'"]),
    ("unknown-executor", {"ok": OK}, ["--tags=ok", "--executor=nowhere"], 2, ["executor 'nowhere'"]),
    ("step-exits-nonzero", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n"
                                 "  - {uses: shell, with: {cmd: [sh, -c, \"echo boom >&2; exit 3\"]}}\n"},
     ["--tags=a"], 1, ["r / step step0", "exited with code 3", "boom"]),
    ("step-times-out", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n"
                             "  - {uses: shell, timeout_s: 0.5, with: {cmd: [sleep, \"30\"]}}\n"},
     ["--tags=a"], 1, ["timed out after 0.5 s"]),
    ("shell-cmd-boolean", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n  - {uses: shell, with: {cmd: [true]}}\n"},
     ["--tags=a"], 2, ["cmd[0] must be a string or a number, not a boolean (True)", "quote it"]),
    ("step-output-not-json", {"r": "name: r\ntags: [a]\nsummary: x\nsteps:\n"
                                   "  - {uses: shell, with: {cmd: [echo, \"{not json\"], parse: json}}\n"},
     ["--tags=a"], 1, ["stdout is not JSON"]),
]


def _state(home: Path) -> tuple[list[str], list[str], int]:
    entries = sorted(p.name for p in (home / "cache" / "entries").glob("*/*"))
    staging = sorted(p.name for p in (home / "cache" / "staging").glob("*"))
    db = home / "data" / "results.sqlite"
    rows = 0
    if db.exists():
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    return entries, staging, rows


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, cli, recipes, cmx_home) -> None:
    _, files, args, code, expected = case
    for name, text in files.items():
        recipes(name, text)
    before = _state(cmx_home)
    result = cli("run", "recipe", "--recipes", recipes.dir, *args)
    assert result.code == code, result.err
    assert "Traceback" not in result.err
    errors = [ln for ln in result.err_lines if ln.startswith("cmx: error:")]
    assert len(errors) == 1, result.err
    for text in expected:
        assert text in errors[0], errors[0]
    entries, staging, rows = _state(cmx_home)
    assert staging == []
    assert entries == before[0]
    # a failed step records one complete error result; bad input records nothing
    assert rows == before[2] + (1 if code == 1 else 0)
    assert result.out == ""


def test_failed_step_result_is_complete_and_marked_error(cli, recipes, cmx_home) -> None:
    recipes("r", "name: r\ntags: [a]\nsummary: x\nsteps:\n  - {uses: shell, with: {cmd: [\"false\"]}}\n")
    result = cli("run", "recipe", "--recipes", recipes.dir, "--tags=a", "--json")
    assert result.code == 1
    doc = __import__("json").loads(result.out)
    assert doc["exit_code"] == 1 and "exited with code 1" in doc["error"]
    [run_dir] = list((cmx_home / "data" / "runs").iterdir())
    import json

    written = json.loads((run_dir / "result.json").read_text())
    assert written["status"] == "error"
    assert written["error"]["node"] == "r" and written["error"]["step"] == "step0"


def test_malformed_facts_file(cli, recipes, tmp_path) -> None:
    recipes("ok", OK)
    facts = tmp_path / "facts.json"
    facts.write_text("{\n  \"facts\": [1,\n")
    result = cli("plan", "--recipes", recipes.dir, "--tags=ok", "--facts", facts)
    assert result.code == 2
    assert f"--facts {facts}:3: not valid JSON" in result.err_lines[0]
    facts.write_text("[]")
    result = cli("plan", "--recipes", recipes.dir, "--tags=ok", "--facts", facts)
    assert result.code == 2 and "'facts' object" in result.err


def test_output_dir_not_empty(cli, recipes, tmp_path) -> None:
    recipes("ok", OK)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = cli("run", "recipe", "--recipes", recipes.dir, "--tags=ok", "--output", out)
    assert result.code == 2 and "not an empty directory" in result.err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_recipes_dir_missing(cli, tmp_path) -> None:
    result = cli("list", "recipes", "--recipes", tmp_path / "nope")
    assert result.code == 2 and "not a directory" in result.err


def test_show_unknown_recipe(cli) -> None:
    result = cli("show", "recipe", "no-such-recipe")
    assert result.code == 2 and "no recipe named 'no-such-recipe'" in result.err


def test_unknown_command_and_missing_subcommand(cli) -> None:
    assert cli("frobnicate").code == 2
    result = cli("cache")
    assert result.code == 2 and "missing subcommand" in result.err
