"""Execution and cache: snapshots, declared outputs, -j, cache hits and invalidation,
Ctrl-C, JSON output, and that nothing is written outside the cache and data dirs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cmx_core
import cmx_core.api
from cmx_core.cache.store import Cache
from cmx_core.providers.types import StepContext

COUNTER = """
name: counter
tags: [counter]
summary: appends a line each time it really runs
inputs:
  log: {type: string, required: true, description: "a side channel counting real runs (not an input file)"}
  label: {type: string, default: x}
steps:
  - uses: shell
    with: {cmd: [sh, -c, 'echo run >> "$1"; echo "$2" > out.txt; echo value=$2', sh, "{{ inputs.log }}",
                 "{{ inputs.label }}"], parse: kv}
outputs:
  value: {}
  file: {value: "{{ node.dir }}/out.txt"}
"""


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_cache_hit_no_cache_refresh(recipes, tmp_path) -> None:
    recipes("counter", COUNTER)
    log = tmp_path / "log.txt"
    kwargs = {"recipes_dirs": [recipes.dir]}
    first = cmx_core.api.run("counter", {"log": str(log)}, **kwargs)
    assert first.document["outputs"]["value"] == "x" and _runs(log) == 1
    out_file = Path(first.document["outputs"]["file"])
    assert out_file.read_text() == "x\n" and "/cache/entries/" in str(out_file)
    cmx_core.api.run("counter", {"log": str(log)}, **kwargs)
    assert _runs(log) == 1  # hit
    assert cmx_core.api.plan("counter", {"log": str(log)}, **kwargs).root.cache_status == "hit"
    cmx_core.api.run("counter", {"log": str(log)}, use_cache=False, **kwargs)
    assert _runs(log) == 2
    cmx_core.api.run("counter", {"log": str(log)}, refresh=True, **kwargs)
    assert _runs(log) == 3
    cmx_core.api.run("counter", {"log": str(log), "label": "y"}, **kwargs)
    assert _runs(log) == 4  # another key
    assert len(Cache().entries()) == 2


def test_hit_is_invalidated_when_a_recorded_path_changes(recipes, tmp_path) -> None:
    recipes("counter", COUNTER)
    log = tmp_path / "log.txt"
    first = cmx_core.api.run("counter", {"log": str(log)}, recipes_dirs=[recipes.dir])
    Path(first.document["outputs"]["file"]).write_text("tampered, longer\n")
    plan = cmx_core.api.plan("counter", {"log": str(log)}, recipes_dirs=[recipes.dir])
    assert plan.root.cache_status == "miss" and "recorded path changed" in plan.root.cache_reason
    cmx_core.api.run("counter", {"log": str(log)}, recipes_dirs=[recipes.dir])
    assert _runs(log) == 2


def test_corrupt_cache_entry_is_recomputed(recipes, tmp_path, capsys) -> None:
    recipes("counter", COUNTER)
    log = tmp_path / "log.txt"
    cmx_core.api.run("counter", {"log": str(log)}, recipes_dirs=[recipes.dir])
    [entry] = Cache().entries()
    (entry.path / "meta.json").write_text("{ not json")
    capsys.readouterr()
    cmx_core.api.run("counter", {"log": str(log)}, recipes_dirs=[recipes.dir])
    assert f"cache entry {entry.path} is corrupt" in capsys.readouterr().err
    assert _runs(log) == 2
    [fresh] = Cache().entries()
    assert json.loads((fresh.path / "meta.json").read_text())["key"] == entry.key


def test_cache_cli_list_show_rm_prune(recipes, tmp_path, cli) -> None:
    recipes("counter", COUNTER)
    cmx_core.api.run("counter", {"log": str(tmp_path / "l")}, recipes_dirs=[recipes.dir])
    listing = json.loads(cli("cache", "list", "--json").out)
    assert [row["recipe"] for row in listing] == ["counter"]
    key = listing[0]["key"]
    shown = json.loads(cli("cache", "show", key[:10]).out)
    assert shown["meta"]["outputs"]["value"] == "x"
    assert cli("cache", "show", "zzzz").code == 2
    stale = Cache().root / "staging" / "deadbeef.999999999.abcd"
    stale.mkdir(parents=True)
    assert json.loads(cli("cache", "prune", "--json").out) == {"pruned": []}
    assert not stale.exists()
    assert json.loads(cli("cache", "rm", "--all", "--json").out) == {"removed": [key]}
    assert Cache().entries() == []


def _mutate_inputs(ctx: StepContext) -> dict:
    ctx.inputs["n"] = 2  # type: ignore[index]
    return {}


def _leaky(ctx: StepContext) -> dict:
    return {"declared": ctx.params["value"], "secret": "must not leak"}


def _read_dep(ctx: StepContext) -> dict:
    return {"seen": sorted(ctx.deps["producer"])}


def test_steps_get_read_only_snapshots_and_only_declared_outputs_leave(recipes) -> None:
    recipes("mut", f"""
        name: mut
        tags: [mut]
        summary: tries to change its inputs
        inputs: {{n: {{type: integer, default: 1}}}}
        steps: [{{uses: python, with: {{function: "{__name__}:_mutate_inputs"}}}}]
    """)
    recipes("producer", f"""
        name: producer
        tags: [producer]
        summary: returns one declared and one undeclared output
        steps: [{{uses: python, with: {{function: "{__name__}:_leaky", value: 7}}}}]
        outputs: [declared]
        cache: false
    """)
    recipes("consumer", f"""
        name: consumer
        tags: [consumer]
        summary: reads its dep
        deps: [{{tags: [producer]}}]
        steps: [{{uses: python, with: {{function: "{__name__}:_read_dep"}}}}]
        outputs: [seen]
        cache: false
    """)
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        with pytest.raises(cmx_core.api.StepFailed, match="TypeError"):
            cmx_core.api.run("mut", recipes_dirs=[recipes.dir])
        result = cmx_core.api.run("consumer", recipes_dirs=[recipes.dir])
    finally:
        sys.path.remove(str(Path(__file__).parent))
    assert result.document["outputs"] == {"seen": ["declared"]}


def test_parallel_jobs_overlap_independent_nodes(recipes, tmp_path) -> None:
    stamp = 'date +%s.%N > "$1.start"; sleep 1; date +%s.%N > "$1.end"'
    for name in ("a", "b"):
        recipes(name, f"""
            name: {name}
            tags: [{name}]
            summary: sleeps
            steps: [{{uses: shell, with: {{cmd: [sh, -c, '{stamp}', sh, "{tmp_path}/{name}"]}}}}]
            cache: false
        """)
    recipes("both", "name: both\ntags: [both]\nsummary: both\ndeps: [{tags: [a]}, {tags: [b]}]\ncache: false\n")
    cmx_core.api.run("both", recipes_dirs=[recipes.dir], jobs=2)
    span = lambda n: (float((tmp_path / f"{n}.start").read_text()), float((tmp_path / f"{n}.end").read_text()))  # noqa: E731
    (a0, a1), (b0, b1) = span("a"), span("b")
    assert a0 < b1 and b0 < a1  # the two sleeps overlapped


def test_two_processes_share_one_cache_entry(recipes, tmp_path, cmx_home) -> None:
    recipes("slow", f"""
        name: slow
        tags: [slow]
        summary: slow and cached
        steps: [{{uses: shell, with: {{cmd: [sh, -c, 'echo run >> "$1"; sleep 1', sh, "{tmp_path}/log"]}}}}]
    """)
    cmd = [sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=slow", "--recipes", str(recipes.dir)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    assert _runs(tmp_path / "log") == 1
    assert len(Cache().entries()) == 1


def test_ctrl_c_stops_cleanly(recipes, tmp_path, cmx_home) -> None:
    marker = tmp_path / "child.pid"
    recipes("hang", f"""
        name: hang
        tags: [hang]
        summary: runs for a long time
        steps: [{{uses: shell, with: {{cmd: [sh, -c, 'echo $$ > "$1"; exec sleep 60', sh, "{marker}"]}}}}]
    """)
    cmd = [sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=hang", "--recipes", str(recipes.dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    child = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    assert list((cmx_home / "cache" / "staging").glob("*")) == []
    assert list((cmx_home / "cache" / "entries").glob("*/*")) == []
    assert not list((cmx_home / "data" / "runs").glob("*/result.json"))


def test_json_flag_prints_exactly_one_document(cli, tmp_path) -> None:
    for args in (["run", "recipe", "--tags=detect,os"], ["plan", "--tags=demo,sort"],
                 ["explain", "--tags=demo,sort"], ["list", "recipes"], ["show", "recipe", "demo-sort"],
                 ["cache", "list"], ["results", "list"], ["plugins", "list"]):
        result = cli(*args, "--json")
        assert result.code == 0, (args, result.err)
        json.loads(result.out)  # exactly one document, nothing else on stdout


def test_run_writes_nothing_in_the_current_directory(tmp_path, cmx_home) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "CMX_HOME": str(cmx_home)}
    subprocess.run([sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=demo,sort,size.2000"],
                   cwd=cwd, env=env, check=True, capture_output=True, timeout=120)
    assert list(cwd.iterdir()) == []


def test_demo_chain_result_validates_and_compares(cli, cmx_home) -> None:
    import jsonschema

    first = cmx_core.api.run("demo,sort,size.5000")
    second = cmx_core.api.run("demo,sort,heap,with-system,size.5000")
    schema = json.loads((Path(cmx_core.__file__).parent / "schemas" / "result.schema.json").read_text())
    for result in (first, second):
        jsonschema.validate(result.document, schema)
        assert result.document["status"] == "valid"
        assert result.document["metrics"]["items_per_second"]["unit"] == "items/s"
    assert "system" in second.plan.root.deps
    compared = cli("results", "compare", first.run_id[:8], second.run_id[:8], "--json")
    assert compared.code == 0, compared.err
    assert "items_per_second" in compared.out


def test_show_recipe_documents_inputs_and_variations(cli) -> None:
    text = cli("show", "recipe", "demo-sort", "--wide").out
    assert "- `--size` integer min 1 max 50000000, default 200000: " in text
    assert "`heap` (group algo)" in text and "`size.#`" in text


def test_lock_replay_and_drift_refusal(cli, recipes, tmp_path) -> None:
    recipes("leaf", "name: leaf\ntags: [leaf]\nsummary: leaf\nsteps: [{uses: shell, with: {cmd: [\"true\"]}}]\n")
    recipes("top", "name: top\ntags: [top]\nsummary: top\ninputs: {n: {type: integer, default: 1}}\n"
                   "deps: [{tags: [leaf]}]\ncache: false\n")
    first = cmx_core.api.run("top", {"n": "7"}, recipes_dirs=[recipes.dir])
    lock = first.run_dir / "lock.json"
    replayed = cli("run", "--lock", lock, "--recipes", recipes.dir, "--json")
    assert replayed.code == 0, replayed.err
    assert json.loads(replayed.out)["status"] == "completed"
    (recipes.dir / "leaf.yaml").write_text("name: leaf\ntags: [leaf]\nsummary: changed leaf\n")
    drift = cli("run", "--lock", lock, "--recipes", recipes.dir)
    assert drift.code == 2
    assert "the run would differ from the lock: node leaf: digest" in drift.err
    assert cli("run", "--lock", lock, "--tags=top", "--recipes", recipes.dir).code == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = cli("run", "--lock", bad)
    assert result.code == 2 and "not a cmx lockfile" in result.err


def _suite_error(ctx: StepContext):
    from cmx_core.api import Metric, ResultPart, StepOutput

    report = ctx.work_dir / "report.txt"
    report.write_text("measured\n")
    part = ResultPart(status="error", benchmark={"suite": "custom", "task": "flaky", "primary_metric": "rate"},
                      metrics={"rate": Metric(5.0, "items/s", True)},
                      invalid_reasons=("3 of 10 requests failed: HTTP 500", "1 of 10 dropped"))
    return StepOutput(outputs={"n": 1}, result=part, artifacts=(cmx_core.api.Artifact(report, "report"),))


def test_suite_reported_errors_exit_1_with_the_reason_and_keep_metrics(cli, recipes) -> None:
    recipes("flaky", f"""
        name: flaky
        tags: [flaky]
        summary: measures but reports failed requests
        steps: [{{uses: python, with: {{function: "{__name__}:_suite_error"}}}}]
        outputs: [n]
    """)
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        result = cli("run", "recipe", "--tags=flaky", "--recipes", recipes.dir, "--json")
    finally:
        sys.path.remove(str(Path(__file__).parent))
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    assert doc["error"] == "flaky reported errors: 3 of 10 requests failed: HTTP 500 (and 1 more)"
    written = json.loads(Path(doc["result_path"]).read_text())
    assert written["metrics"]["rate"]["value"] == 5.0 and written["status"] == "error"
    # the node was cached: its artifact was moved with the entry and still hashes
    [artifact] = written["artifacts"]
    assert artifact["kind"] == "report" and len(artifact["sha256"]) == 64


def test_executor_options_and_container_routing(cli, recipes, monkeypatch) -> None:
    recipes("boxed", "name: boxed\ntags: [boxed]\nsummary: wants a container\ncontainer: python\n"
                     "steps: [{uses: shell, with: {cmd: [\"true\"]}}]\n")
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")  # no cmx-docker loaded
    result = cli("run", "recipe", "--tags=boxed", "--recipes", recipes.dir)
    assert result.code == 2
    assert "recipe boxed runs in container 'python': no loaded plugin provides executor 'docker'" in result.err
    assert "--executor local" in result.err
    assert cli("run", "recipe", "--tags=boxed", "--recipes", recipes.dir, "--executor", "local").code == 0
    bad = cli("run", "recipe", "--tags=boxed", "--recipes", recipes.dir,
              "--executor", "local", "--executor-opt", "nokey")
    assert bad.code == 2 and "expected KEY=VALUE" in bad.err
    unknown = cli("run", "recipe", "--tags=boxed", "--recipes", recipes.dir, "--executor", "local",
                  "--executor-opt", "session=x")  # settings are typed: the local executor has none
    assert unknown.code == 2 and unknown.err_lines == [
        "cmx: error: local executor: unknown option 'session' (its options: none; see 'cmx plugins info')"]


READER = """
name: reader
tags: [reader]
summary: reads a file and a host variable
inputs:
  src: {type: path, required: true}
steps:
  - uses: shell
    with: {cmd: [sh, -c, 'echo v=$(cat "$1")-$FOO', sh, "{{ inputs.src }}"], parse: kv, env_allow: [FOO]}
outputs: [v]
"""


def test_key_covers_path_input_content_and_allowed_env(recipes, tmp_path, monkeypatch) -> None:
    recipes("reader", READER)
    src = tmp_path / "in.txt"
    src.write_text("one")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FOO", "a")
    run = lambda: cmx_core.api.run("reader", {"src": "in.txt"}, recipes_dirs=[recipes.dir]).document["outputs"]["v"]  # noqa: E731
    assert run() == "one-a"  # a relative path is resolved against the working directory
    src.write_text("two, longer")
    assert run() == "two, longer-a"
    monkeypatch.setenv("FOO", "b")
    assert run() == "two, longer-b"
    assert run() == "two, longer-b"
    assert len(Cache().entries()) == 3


def _fact_reader(ctx: StepContext) -> dict:
    return {"kernel": ctx.facts["os"]["kernel"]}


def test_facts_a_step_reads_are_checked_on_a_hit(recipes, tmp_path) -> None:
    recipes("kern", f"""
        name: kern
        tags: [kern]
        summary: reads a fact at run time
        steps: [{{uses: python, with: {{function: "{__name__}:_fact_reader"}}}}]
        outputs: [kernel]
    """)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"facts": {"os": {"name": "linux", "kernel": "1.0"}}}))
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        first = cmx_core.api.run("kern", recipes_dirs=[recipes.dir], facts_file=facts)
        facts.write_text(json.dumps({"facts": {"os": {"name": "linux", "kernel": "2.0"}}}))
        second = cmx_core.api.run("kern", recipes_dirs=[recipes.dir], facts_file=facts)
    finally:
        sys.path.remove(str(Path(__file__).parent))
    assert first.document["outputs"]["kernel"] == "1.0"
    assert second.document["outputs"]["kernel"] == "2.0"


def test_cmx_facts_step_is_keyed_by_the_facts_it_returns(recipes, tmp_path) -> None:
    recipes("osf", "name: osf\ntags: [osf]\nsummary: os facts\nsteps: [{uses: cmx.facts, with: {names: [os]}}]\n"
                   "outputs: [os]\n")
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"facts": {"os": {"name": "linux", "kernel": "9.9"}}}))
    here = cmx_core.api.run("osf", recipes_dirs=[recipes.dir])
    there = cmx_core.api.run("osf", recipes_dirs=[recipes.dir], facts_file=facts)
    assert there.document["outputs"]["os"]["kernel"] == "9.9"
    assert here.plan.root.cache_key != there.plan.root.cache_key


def _loud(ctx: StepContext) -> dict:
    print("chatty step output")
    return {}


def test_a_step_printing_does_not_break_json(cli, recipes) -> None:
    recipes("loud", f"name: loud\ntags: [loud]\nsummary: prints\n"
                    f"steps: [{{uses: python, with: {{function: '{__name__}:_loud'}}}}]\n")
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        result = cli("run", "recipe", "--tags=loud", "--recipes", recipes.dir, "--json")
    finally:
        sys.path.remove(str(Path(__file__).parent))
    assert result.code == 0
    assert json.loads(result.out)["status"] == "completed"
    assert "chatty step output" in result.err


def test_cached_node_over_an_uncached_dep_hits_on_the_next_run(recipes, tmp_path) -> None:
    recipes("fresh", "name: fresh\ntags: [fresh]\nsummary: uncached\n"
                     "steps: [{uses: shell, with: {cmd: [sh, -c, 'echo x > out; echo path=$PWD/out'], parse: kv}}]\n"
                     "outputs: [path]\ncache: false\n")
    recipes("over", f"name: over\ntags: [over]\nsummary: cached over uncached\ndeps: [{{tags: [fresh]}}]\n"
                    f"steps: [{{uses: shell, with: {{cmd: [sh, -c, 'echo run >> \"$1\"', sh, '{tmp_path}/log']}}}}]\n")
    for _ in range(3):
        cmx_core.api.run("over", recipes_dirs=[recipes.dir])
    assert _runs(tmp_path / "log") == 1
    assert len(Cache().entries()) == 1
