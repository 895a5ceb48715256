"""Imported scripts running for real through ``cmx``: CM's env contract, the run directory,
declared outputs only, no prompts, version constraints, MLC scripts, the live
``CMX_CM_PATH`` source with stat revalidation, and ``cmx import cm`` on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cm_helpers import outputs, write_script

Cli = Callable[..., Any]


def _import(cmx_cli: Cli, collection: Path, out: Path) -> dict[str, Any]:
    proc = cmx_cli("import", "cm", str(collection), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def test_run_follows_cm_env_contract(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    elsewhere = tmp_path / "user-cwd"
    elsewhere.mkdir()
    proc = cmx_cli("run", "recipe", "--tags=cm,demo,tool,size.7", "--label=hello", "--recipes", str(out), "--json",
                   cwd=elsewhere)
    got = outputs(proc)
    env = got["new_env"]
    assert env["CM_DEMO_ECHO"] == "fixed/slow"  # run.sh saw the exported env; tmp-run-env.out merged
    assert env["CM_DEMO_TOOL_MODE"] == "slow" and env["CM_DEMO_TOOL_LABEL"] == "hello"
    assert env["CM_DEMO_TOOL_SIZE"] == "7"  # the parametric variation
    assert env["CM_DEMO_TOOL_BASE"] == "base-ran"  # the dep's new_env reached the script
    assert "CM_DEMO_NOT_DECLARED" not in env and "CM_DEMO_BASE_TEXT" not in env  # new_env_keys filter
    assert got["new_state"] == {"demo_from_run": "state-ok", "demo_seen": "state-ok"}  # tmp-run-state.json merged
    assert got["version"] == "2.1.0" and got["cm_demo_echo"] == "fixed/slow"
    cwd = Path(env["CM_DEMO_TOOL_CWD"])
    assert elsewhere not in (cwd, *cwd.parents) and collection not in cwd.parents
    assert list(elsewhere.iterdir()) == [] and not (collection / "demo-tool" / "tmp-run-env.out").exists()


def test_variation_base_and_group_selection(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    env = outputs(cmx_cli("run", "recipe", "--tags=cm,demo,tool,extra", "--recipes", str(out), "--json"))["new_env"]
    assert env["CM_DEMO_TOOL_MODE"] == "fast" and env["CM_DEMO_EXTRA"] == "yes"


def test_prompts_and_version_constraints_fail_clearly(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    asked = cmx_cli("run", "recipe", "--tags=cm,demo,tool", "--cm-demo-ask=yes", "--recipes", str(out), "--json")
    assert asked.returncode == 1 and "asked for interactive input ('Continue?')" in asked.stderr
    assert "Traceback" not in asked.stderr
    old = cmx_cli("run", "recipe", "--tags=cm,demo,tool", "--version-min=3.0", "--recipes", str(out), "--json")
    assert old.returncode == 1 and "detected version 2.1.0 does not meet" in old.stderr


def test_mlc_script_runs_with_mlc_prefix(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    env = outputs(cmx_cli("run", "recipe", "--tags=mlc,mlcdemo,echo", "--recipes", str(out), "--json"))["new_env"]
    assert env == {"MLC_ECHO_TRUE": "True", "MLC_ECHO_SCRIPT": str(collection / "mlc-echo")}


def test_live_path_is_revalidated_by_stat(cmx_cli: Cli, collection: Path, cmx_home: Path) -> None:
    live = {"CMX_CM_PATH": str(collection)}
    first = outputs(cmx_cli("run", "recipe", "--tags=cm,demo,base", "--json", env=live))
    assert first["new_env"]["CM_DEMO_BASE_TEXT"] == "base-ran"
    meta = collection / "demo-base" / "_cm.yaml"
    meta.write_text(meta.read_text().replace("tags: [demo, base]", "tags: [demo, base, renamed]"))
    stamp = time.time() + 5
    os.utime(meta, (stamp, stamp))
    proc = cmx_cli("list", "recipes", "--tags=cm,renamed", "--json", env=live)
    assert proc.returncode == 0 and "cm.demo-base" in proc.stdout
    plugin_off = cmx_cli("list", "recipes", "--tags=cm,renamed", "--json")
    assert "cm.demo-base" not in plugin_off.stdout  # without CMX_CM_PATH there is no live source


def test_import_cli_bad_input_exit_2(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    missing = cmx_cli("import", "cm", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--json")
    assert missing.returncode == 2 and "not a directory" in json.loads(missing.stdout)["error"]
    assert "Traceback" not in missing.stderr
    inside = cmx_cli("import", "cm", str(collection), "--out", str(collection / "o"))
    assert inside.returncode == 2 and "inside the collection" in inside.stderr and not (collection / "o").exists()
    noun = cmx_cli("import", "ck", str(collection))
    assert noun.returncode == 2 and "invalid choice" in noun.stderr


def test_import_report_counts(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    out = tmp_path / "recipes"
    proc = cmx_cli("import", "cm", str(collection), "--out", str(out), "--report", "--run",
                   "demo-*,demo-tool:_fast:_size.7", "--json")
    assert proc.returncode == 0, proc.stderr
    cov = json.loads(proc.stdout)["coverage"]
    assert (cov["scripts"], cov["imported"], cov["planned"]) == (4, 4, 4)
    assert cov["run_attempted"] == 4 and cov["ran"] == 4
    assert "cm.demo-tool:_fast:_size.7" in [r["name"] for r in cov["runs"]]
    assert json.loads((out / "coverage.json").read_text()) == cov


def test_variation_script_name_runs_another_script(cmx_cli: Cli, tmp_path: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "recipes"
    write_script(root, "two-scripts", """
        alias: two-scripts
        tags: [two, scripts]
        new_env_keys: [CM_WHICH]
        variations:
          plot: {script_name: plot}
        """, run_sh='echo "CM_WHICH=run" > tmp-run-env.out\n')
    (root / "two-scripts" / "plot.sh").write_text('#!/bin/bash\necho "CM_WHICH=plot" > tmp-run-env.out\n')
    _import(cmx_cli, root, out)
    plain = outputs(cmx_cli("run", "recipe", "--tags=cm,two,scripts", "--recipes", str(out), "--json"))
    plot = outputs(cmx_cli("run", "recipe", "--tags=cm,two,scripts,plot", "--recipes", str(out), "--json"))
    assert (plain["new_env"], plot["new_env"]) == ({"CM_WHICH": "run"}, {"CM_WHICH": "plot"})


def test_versions_set_env_and_deps_of_the_version_asked_for(cmx_cli: Cli, tmp_path: Path) -> None:
    root, out = tmp_path / "c", tmp_path / "recipes"
    write_script(root, "helper", "alias: helper\ntags: [helper]\nnew_env_keys: [CM_HELPER]\n",
                 run_sh='echo "CM_HELPER=ran" > tmp-run-env.out\n')
    write_script(root, "versioned", """
        alias: versioned
        tags: [versioned]
        default_version: '1.0'
        new_env_keys: [CM_V_*, CM_HELPER]
        versions:
          '1.0': {env: {CM_V_URL: one, CM_V_TEMPLATE: 'file-{{CM_V_URL}}.tar'}}
          '2.0': {env: {CM_V_URL: two}, deps: [{tags: helper}], adr: {x: {tags: y}}}
        """, run_sh='echo "CM_V_SEEN=$CM_V_URL" > tmp-run-env.out\n')
    report = _import(cmx_cli, root, out)
    assert report["issue_counts"]["unmapped"] >= 1  # versions.2.0.adr
    one = outputs(cmx_cli("run", "recipe", "--tags=cm,versioned", "--recipes", str(out), "--json"))
    two = outputs(cmx_cli("run", "recipe", "--tags=cm,versioned", "--version=2.0", "--recipes", str(out), "--json"))
    assert one["new_env"] == {"CM_V_URL": "one", "CM_V_SEEN": "one", "CM_V_TEMPLATE": "file-{{CM_V_URL}}.tar"}
    assert two["new_env"] == {"CM_V_URL": "two", "CM_V_SEEN": "two", "CM_HELPER": "ran"}
    issues = json.loads((out / "report.json").read_text())["issues"]
    assert any(i["key"] == "versions.2.0.adr" and i["kind"] == "unmapped" for i in issues)


LEFT_BEHIND = """
import os, subprocess, sys
import psutil
run = subprocess.Popen(sys.argv[1:], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
err = run.communicate()[1]
left = []
for process in psutil.process_iter(["name", "status"]):
    try:
        if os.getpgid(process.pid) == run.pid:
            left.append(f"{process.info['name']} ({process.info['status']})")
    except (ProcessLookupError, psutil.Error):
        pass
print(run.returncode, left, err[-300:] if run.returncode else "")
"""


def test_a_run_leaves_no_process_of_its_group_behind(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    """Every process cmx and the script runner started is waited for before cmx exits: none of
    its process group is left, not even a zombie (the runner's ``os.popen`` of ``getconf``
    was one, reparented to init after cmx had gone)."""
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    cmx = [sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=cm,demo,tool", "--recipes", str(out), "--json"]
    probe = [sys.executable, "-c", LEFT_BEHIND, *cmx]
    for _ in range(3):
        done = subprocess.run(probe, capture_output=True, text=True, timeout=600, check=True,
                              env={**os.environ, "CMX_HOME": str(tmp_path / "home")})
        assert done.stdout.strip().startswith("0 []"), done.stdout


ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)) + "env: {CM_BOMB: *a8}\n"
"""Nine lines that expand to 10^9 values: before, the step handed them to the runner as JSON
and cmx grew past 10 GB of memory."""


@pytest.mark.parametrize("hostile", [ALIAS_BOMB, "env: &x {CM_SELF: [*x]}\n", "env: " + "[" * 3000 + "]" * 3000 + "\n",
                                     "x: '" + "y" * (5 << 20) + "'\n"],
                         ids=["alias-bomb", "self-reference", "deep", "too-large"])
def test_hostile_metadata_is_one_line_at_import_and_at_run_time(hostile: str, cmx_cli: Cli, tmp_path: Path) -> None:
    """Metadata that would expand without bound, refer into itself, nest past any parser or
    fill memory is refused in one line: at import (the script is listed as failed, the rest
    import) and when the script changes to it after its import (exit 2, no traceback)."""
    root, out = tmp_path / "c", tmp_path / "recipes"
    head = "alias: {0}\nuid: {1}\nautomation_alias: script\ntags: [{0}]\n"
    write_script(root, "fine", head.format("fine", "f" * 16), run_sh="true\n")
    write_script(root, "hostile", head.format("hostile", "e" * 16) + hostile)
    report = _import(cmx_cli, root, out)
    assert report["imported"] == 1 and len(report["failed"]) == 1
    assert "hostile/_cm.yaml" in report["failed"][0]["reason"]
    (root / "fine" / "_cm.yaml").write_text(head.format("fine", "f" * 16) + hostile)
    ran = cmx_cli("run", "recipe", "--tags=cm,fine", "--recipes", str(out), "--json", timeout=600)
    assert ran.returncode == 2, ran.stderr
    assert "fine/_cm.yaml" in json.loads(ran.stdout)["error"] and "Traceback" not in ran.stderr


def test_cm_run_script_bad_values_are_one_line_exit_2(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    """Tags that are only commas (before: the run went ahead and took a script), a --recipes
    that is a file, and a damaged stamps.json (before: a JSON traceback) are one line, exit 2."""
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "stamps.json").write_text('{"scripts": [1, 2')
    cases = {"--tags=,, ,": (str(out), "--tags=TAGS is required"),
             "--tags=demo,tool": (str(a_file), "not a directory"),
             "--tags=demo": (str(tmp_path / "damaged"), "stamps.json: not as an import writes it")}
    for tags, (recipes, message) in cases.items():
        done = cmx_cli("cm", "run", "script", tags, "--recipes", recipes, "--json")
        assert done.returncode == 2, done.stderr
        assert message in json.loads(done.stdout)["error"] and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_bad_cm_env_input_is_bad_input_exit_2(cmx_cli: Cli, collection: Path, tmp_path: Path) -> None:
    """``cm_env`` that is not a JSON object (not JSON, a list, arrays nested past the parser)
    is the user's input to fix: one line, exit 2 (before: exit 1 as a failed run, and the deep
    one a RecursionError traceback file)."""
    out = tmp_path / "recipes"
    _import(cmx_cli, collection, out)
    for value in ("notjson", "[1, 2]", "[" * 5000 + "]" * 5000):
        done = cmx_cli("run", "recipe", "--tags=cm,demo,base", "--recipes", str(out), f"--cm_env={value}", "--json")
        assert done.returncode == 2, done.stderr
        error = json.loads(done.stdout)["error"]
        assert "input cm_env must be a JSON object of env keys" in error and "traceback" not in error
