"""Defects a review found in the engine, each pinned by a test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

import cmx_core
import cmx_core.api
from cmx_core.api import StepType, hookimpl
from cmx_core.cache.store import Cache
from cmx_core.plugins import loader as plugins

CACHED = "name: c\ntags: [c]\nsummary: cached\nsteps: [{uses: shell, with: {cmd: [\"true\"]}}]\ncache: {expires: 1s}\n"


@pytest.mark.parametrize("meta", ["[]", '{"key": "K", "created": "x"}', '{"key": "K", "paths": {"/x": 5}}'])
def test_corrupt_cache_metadata_is_handled_without_tracebacks(cli, recipes, meta) -> None:
    recipes("c", CACHED)
    first = cmx_core.api.run("c", recipes_dirs=[recipes.dir])
    [entry] = Cache().entries()
    (entry.path / "meta.json").write_text(meta.replace("K", entry.key))
    for args in (("cache", "list", "--json"), ("plan", "--tags=c", "--recipes", recipes.dir),
                 ("cache", "prune", "--json")):
        result = cli(*args)
        assert result.code == 0, (args, result.err)
        assert "Traceback" not in result.err
    assert Cache().entries() == []  # prune removed the corrupt entry
    assert first.document["status"] == "completed"


def test_prune_removes_expired_entries(cli, recipes) -> None:
    recipes("c", CACHED)
    cmx_core.api.run("c", recipes_dirs=[recipes.dir])
    assert json.loads(cli("cache", "prune", "--json").out) == {"pruned": []}
    time.sleep(1.2)
    assert len(json.loads(cli("cache", "prune", "--json").out)["pruned"]) == 1


def test_parametric_values_with_dots_and_conflicting_values(recipes) -> None:
    recipes("p", "name: p\ntags: [p]\nsummary: p\ninputs: {lr: {type: number, default: 1}}\n"
                 "variations:\n  lr.#: {inputs: {lr: '#'}}\n")
    assert cmx_core.api.plan("p,lr.0.01", recipes_dirs=[recipes.dir]).root.inputs["lr"] == 0.01
    with pytest.raises(cmx_core.api.ResolveError, match=r"two values: 0\.1 and 0\.2"):
        cmx_core.api.plan("p,lr.0.1,lr.0.2", recipes_dirs=[recipes.dir])


def test_sigterm_cleans_up_like_ctrl_c(recipes, tmp_path, cmx_home) -> None:
    marker = tmp_path / "child.pid"
    recipes("hang", f"name: hang\ntags: [hang]\nsummary: long\n"
                    f"steps: [{{uses: shell, with: {{cmd: [sh, -c, 'echo $$ > \"$1\"; exec sleep 60', "
                    f"sh, '{marker}']}}}}]\n")
    proc = subprocess.Popen([sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=hang",
                             "--recipes", str(recipes.dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err
    with pytest.raises(ProcessLookupError):
        os.kill(int(marker.read_text()), 0)
    assert list((cmx_home / "cache" / "staging").glob("*")) == []


def test_list_and_show_report_broken_recipe_files(cli, recipes) -> None:
    recipes("good", "name: good\ntags: [good]\nsummary: fine\n")
    recipes("bad", "name: bad\ntags: [bad\n")
    listed = cli("list", "recipes", "--recipes", recipes.dir)
    assert listed.code == 2 and "good" in listed.out and "bad.yaml" in listed.err
    shown = cli("show", "recipe", "bad", "--recipes", recipes.dir)
    assert shown.code == 2 and "bad.yaml" in shown.err


def test_lock_replay_reuses_the_recipe_dirs_of_the_run(cli, recipes) -> None:
    recipes("mine", "name: mine\ntags: [mine]\nsummary: only in --recipes\n")
    run = cmx_core.api.run("mine", recipes_dirs=[recipes.dir])
    replay = cli("run", "--lock", run.run_dir / "lock.json")
    assert replay.code == 0, replay.err


def test_version_json_and_strict_unknown_plugin(cli, monkeypatch) -> None:
    assert json.loads(cli("--version", "--json").out) == {"name": "cmx", "version": cmx_core.__version__}
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "nosuch")
    result = cli("list", "recipes", "--strict-plugins")
    assert result.code == 2 and "CMX_LOAD_PLUGINS names 'nosuch'" in result.err


def test_a_step_validator_refusing_an_entry_forces_a_rerun(recipes, tmp_path, monkeypatch) -> None:
    runs = tmp_path / "runs"
    verdict = {"ok": True}

    @hookimpl
    def cmx_register_steps(register):
        def run(ctx):
            with open(runs, "a") as fh:
                fh.write("run\n")
            return {"v": 1}
        register(StepType(name="val.step", summary="s", run=run, validate=lambda outputs: verdict["ok"]))

    registry = plugins.load_registry(extra=[("val", SimpleNamespace(cmx_register_steps=cmx_register_steps))])
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    recipes("v", "name: v\ntags: [v]\nsummary: v\nsteps: [{uses: val.step}]\noutputs: [v]\n")
    for _ in range(2):
        cmx_core.api.run("v", recipes_dirs=[recipes.dir])
    assert runs.read_text().count("run") == 1
    verdict["ok"] = False
    cmx_core.api.run("v", recipes_dirs=[recipes.dir])
    assert runs.read_text().count("run") == 2


def test_a_when_condition_keys_only_the_fact_path_it_reads(recipes, tmp_path) -> None:
    recipes("m", "name: m\ntags: [m]\nsummary: m\ndeps: [{tags: [x], when: 'facts.memory.total_bytes > 1'}]\n"
                 "steps: [{uses: shell, with: {cmd: [\"true\"]}}]\n")
    recipes("x", "name: x\ntags: [x]\nsummary: x\n")
    facts = tmp_path / "f.json"
    facts.write_text(json.dumps({"facts": {"memory": {"total_bytes": 10, "available_bytes": 1}}}))
    first = cmx_core.api.plan("m", recipes_dirs=[recipes.dir], facts_file=facts).root
    facts.write_text(json.dumps({"facts": {"memory": {"total_bytes": 10, "available_bytes": 7}}}))
    second = cmx_core.api.plan("m", recipes_dirs=[recipes.dir], facts_file=facts).root
    assert first.facts_used == {"memory.total_bytes": 10}
    assert first.cache_key == second.cache_key
