"""Recovery and fault injection on the local executor (docs/faults.md): recovery policies by
fault class, exit code 2 never retried, a checkpoint that a killed attempt hands to the next,
injected kill-step/oom/disk-full/partition faults, and the fault-tolerance report in
``cmx results show``, ``compare`` and the HTML report. Every step here is bounded: a few
seconds of sleep at most, and each test's runs stop by themselves."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.faults.registry import parse_injection
from cmx_core.plugins import loader as plugins
from cmx_core.providers.recovery import Recovery, RetryPolicy
from cmx_core.recipes.retries import PolicyError, parse_policy
from cmx_core.results.validate import validate_document
from cmx_core.run import engine
from cmx_core.sandbox.bubblewrap import make_groups
from tests.remote_plugin import subprocess_executor

TRAIN = Path(__file__).parent / "fixtures" / "faults" / "train.py"
STEPS = 20

TRAIN_RECIPE = """
name: train
tags: [train-ft]
summary: a training-like step
cache: false
inputs:
  work_log: {{type: string}}
steps:
  - uses: shell
    id: train
    checkpoint: {checkpoint}
    retries: {{max: 2, on: [killed]}}
    with:
      cmd: [{python}, {train}, "{steps}", "0.1", "{{{{ inputs.work_log }}}}"]
      parse: json
outputs: [done]
"""

HOG_RECIPE = """
name: hog
tags: [hog-ft]
summary: needs memory, disk or the network, or refuses its input
cache: false
inputs:
  what: {{type: string, default: mem}}
steps:
  - uses: shell
    id: hog
    retries: {retries}
    with:
      cmd: [{python}, -c, "{script}", "{{{{ inputs.what }}}}"]
"""

HOG_SCRIPT = ("import os, socket, sys\\nwhat = sys.argv[1]\\nif what == 'mem':\\n  b = bytearray(300 << 20)\\n"
              "elif what == 'bad':\\n  sys.exit(2)\\nelif what == 'net':\\n"
              "  socket.create_connection(('127.0.0.1', 9), timeout=5)\\nelif what == 'disk':\\n"
              "  open('out.bin', 'wb').write(os.urandom(1 << 20))\\n"
              "elif what == 'sleep' and os.environ['CMX_ATTEMPT'] == '1':\\n"
              "  import time; time.sleep(10)\\nprint('ok')")


def _need(why: str | None) -> None:
    """Skip where this machine lacks the mechanism; in CI that is a failure."""
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"required in CI: {why}")
    pytest.skip(why)


def _cgroup_memory() -> str | None:
    groups = make_groups(("memory",))
    try:
        return None if groups.set_memory(64 << 20) else "no writable memory cgroup (needs root)"
    finally:
        groups.remove()


def _train(recipes: Any, checkpoint: bool = True) -> None:
    recipes("train", TRAIN_RECIPE.format(checkpoint=str(checkpoint).lower(), python=sys.executable,
                                         train=TRAIN, steps=STEPS))


def _hog(recipes: Any, retries: str = "{max: 1}") -> None:
    recipes("hog", HOG_RECIPE.format(retries=retries, python=sys.executable, script=HOG_SCRIPT))


def _result(run_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    validate_document(document)
    return document


def _work(log: Path) -> list[tuple[int, int]]:
    """(attempt, step) of every training step done, from the step's own work log."""
    return [(int(a), int(s)) for a, s in (line.split() for line in log.read_text().splitlines())]


def test_policy_parses_on_unquoted_and_refuses_bad_input_and_unknown_classes() -> None:
    assert parse_policy({"max": 2, True: ["oom"], "backoff": "5s"}).on == ("oom",)  # YAML 1.1's on: -> True
    assert parse_policy(3).max == 3
    for bad, key in (({"on": ["bad_input"]}, "on"), ({"on": ["gremlins"]}, "on"), ({"max": -1}, "max"),
                     ({"backoff": "soon"}, "backoff"), ({"tries": 2}, "tries")):
        with pytest.raises(PolicyError) as caught:
            parse_policy(bad)
        assert caught.value.key == key


def test_a_bad_policy_in_a_recipe_is_one_line_naming_file_line_and_key(recipes: Any, cli: Callable[..., Any],
                                                                       tmp_path: Path) -> None:
    _hog(recipes, "{max: 1, on: [bad_input]}")
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--output", str(tmp_path / "r"))
    assert result.code == 2
    assert len(result.err_lines) == 1 and "Traceback" not in result.err
    assert "hog.yaml:" in result.err and "steps.0.retries.on" in result.err and "never retried" in result.err
    assert not (tmp_path / "r").exists()


def test_checkpointed_training_killed_at_half_resumes_with_less_work_than_a_restart(
        recipes: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    _train(recipes)
    log = tmp_path / "work.log"
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "train-ft", f"--work_log={log}",
                 "--inject", "kill-step@50%", "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    document = _result(tmp_path / "run")
    assert document["outputs"]["done"] == STEPS
    first, second = document["attempts"]
    assert (first["number"], first["fault"], first["injected"], first["resumed"]) == (1, "killed", "kill-step@50%",
                                                                                       False)
    assert (second["number"], second["fault"], second["resumed"]) == (2, None, True)
    work = _work(log)
    killed_at = max(step for attempt, step in work if attempt == 1)
    assert STEPS // 2 <= killed_at < STEPS  # killed at the 50 % mark, before the end
    assert min(step for attempt, step in work if attempt == 2) == killed_at + 1  # resumed, not restarted
    assert len(work) == STEPS < killed_at + STEPS  # a restart would redo the first killed_at steps
    [fault] = document["faults"]
    assert fault["class"] == "killed" and fault["recovered"] and fault["detect_s"] is not None
    assert first["work_lost_s"] <= first["wall_s"]
    assert document["provenance"]["injections"][0]["at_progress"] == 0.5
    assert not (tmp_path / "run" / "checkpoints").exists()  # removed once the step succeeded


def test_without_a_checkpoint_the_retry_restarts_and_does_all_the_work_again(
        recipes: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    _train(recipes, checkpoint=False)
    log = tmp_path / "work.log"
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "train-ft", f"--work_log={log}",
                 "--inject", "kill-step@50%", "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    work = _work(log)
    killed_at = max(step for attempt, step in work if attempt == 1)
    assert min(step for attempt, step in work if attempt == 2) == 1
    assert len(work) == killed_at + STEPS
    first = _result(tmp_path / "run")["attempts"][0]
    assert first["work_lost_s"] == pytest.approx(first["wall_s"], abs=1e-3)  # all of it was lost


def test_a_kept_checkpoint_stays_after_success(recipes: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    recipes("train", TRAIN_RECIPE.format(checkpoint="{keep: true}", python=sys.executable, train=TRAIN, steps=2))
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "train-ft", f"--work_log={tmp_path / 'w'}",
                 "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    state = tmp_path / "run" / "checkpoints" / "train" / "train" / "state.json"
    assert json.loads(state.read_text()) == {"done": 2}
    assert "attempts" not in _result(tmp_path / "run")  # one clean attempt, nothing injected: no section


@pytest.mark.parametrize("executor_opts", [(), ("--retries", "3")])
def test_exit_code_2_is_never_retried(recipes: Any, cli: Callable[..., Any], tmp_path: Path,
                                      executor_opts: tuple[str, ...]) -> None:
    _hog(recipes, "{max: 3}")
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--what=bad", *executor_opts,
                 "--inject", "kill-step@60s", "--output", str(tmp_path / "run"))
    assert result.code != 0
    document = _result(tmp_path / "run")
    assert [(a["number"], a["fault"]) for a in document["attempts"]] == [(1, "bad_input")]
    assert document["faults"][0]["recovered"] is False and document["status"] == "error"


def test_a_fault_class_the_policy_does_not_name_is_not_retried(recipes: Any, cli: Callable[..., Any],
                                                                tmp_path: Path) -> None:
    _train(recipes)
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "train-ft", f"--work_log={tmp_path / 'w'}",
                 "--retries", "2", "--retry-on", "oom", "--inject", "kill-step@0.3s", "--output", str(tmp_path / "r"))
    assert result.code == 1
    document = _result(tmp_path / "r")
    assert [(a["number"], a["fault"]) for a in document["attempts"]] == [(1, "killed")]
    assert (tmp_path / "r" / "checkpoints" / "train" / "train").is_dir()  # a failed run keeps its checkpoint


def test_the_backoff_waits_before_the_retry(recipes: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    _hog(recipes, "{max: 1, backoff: 0.5s}")
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--what=sleep",
                 "--inject", "kill-step@0s", "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    [fault] = _result(tmp_path / "run")["faults"]
    assert fault["recover_s"] >= 0.5 and fault["recovered"]


def test_oom_injection_is_a_memory_limit_the_kernel_enforces(recipes: Any, cli: Callable[..., Any],
                                                             tmp_path: Path) -> None:
    _need(_cgroup_memory())
    _hog(recipes)
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--what=mem", "--inject", "oom@64M",
                 "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    document = _result(tmp_path / "run")
    assert [(a["number"], a["fault"]) for a in document["attempts"]] == [(1, "oom"), (2, None)]


def test_disk_full_injection_is_a_small_tmpfs_over_the_output(recipes: Any, cli: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    _need(None if shutil.which("bwrap") else "bubblewrap (bwrap) is not installed")
    _hog(recipes)
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--what=disk", "--inject", "disk-full@64K",
                 "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    document = _result(tmp_path / "run")
    assert [(a["number"], a["fault"]) for a in document["attempts"]] == [(1, "disk_full"), (2, None)]
    assert (tmp_path / "run" / "nodes" / "hog" / "out.bin").stat().st_size == 1 << 20  # the retry wrote it


def test_partition_injection_is_a_network_namespace_without_a_route(recipes: Any, cli: Callable[..., Any],
                                                                    tmp_path: Path) -> None:
    _need(None if shutil.which("unshare") else "util-linux unshare is not installed")
    _hog(recipes, "{max: 1, on: [network]}")
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--what=net", "--inject", "partition",
                 "--output", str(tmp_path / "run"))
    document = _result(tmp_path / "run")
    assert document["attempts"][0]["fault"] == "network", document["attempts"][0]["message"]
    # the retry runs outside the namespace: port 9 (discard) on loopback refuses, so it fails as exit_code
    assert [a["fault"] for a in document["attempts"]][1:] in ([None], ["exit_code"])
    assert result.code in (0, 1)


@pytest.mark.parametrize(("text", "problem"), [("gremlins", "unknown fault"), ("kill-step@soon", "kill-step@"),
                                               ("oom@lots", "size"), ("partition@2s", "no @WHEN")])
def test_bad_injections_are_one_line_exit_2(cli: Callable[..., Any], text: str, problem: str) -> None:
    result = cli("run", "--tags", "detect,os", "--inject", text)
    assert result.code == 2 and len(result.err_lines) == 1 and problem in result.err


@pytest.mark.parametrize("executor", ["local", "subprocess"])
def test_kill_worker_is_refused_where_there_is_no_worker(cli: Callable[..., Any], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, executor: str) -> None:
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("subprocess-exec", subprocess_executor)]))
    result = cli("run", "--tags", "detect,os", "--executor", executor, "--inject", "kill-worker",
                 "--output", str(tmp_path / "r"))
    assert result.code == 2 and "has no worker to kill" in result.err and not (tmp_path / "r").exists()
    assert len(result.err_lines) == 1


def test_injection_parse() -> None:
    assert parse_injection("kill-step@2.5s").after_s == 2.5
    assert parse_injection("kill-step@25%").at_progress == 0.25
    assert parse_injection("oom@32M").limit_bytes == 32 << 20
    assert parse_injection("disk-full").limit_bytes == 64 << 10


def test_the_report_shows_in_results_show_compare_and_html(recipes: Any, cli: Callable[..., Any],
                                                           tmp_path: Path) -> None:
    _hog(recipes)
    ids = []
    for index, inject in enumerate(("kill-step@0s", None)):
        extra = ("--inject", inject) if inject else ()
        result = cli("run", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--what=sleep", *extra,
                     "--output", str(tmp_path / f"r{index}"), "--json")
        assert result.code == 0, result.err
        ids.append(json.loads(result.out)["run_id"])
    shown = cli("results", "show", ids[0])
    assert "fault tolerance:" in shown.out and "faults: 1 (killed x1); 1 injected, 1 recovered" in shown.out
    assert "completeness: 1/1 (100%)" in shown.out and "attempt 1 of hog/hog: killed" in shown.out
    assert "fault tolerance" not in cli("results", "show", ids[1]).out
    compared = cli("results", "compare", *ids, "--json")
    assert compared.code == 0, compared.err
    report = json.loads(compared.out)["fault_tolerance"]
    assert list(report) == [ids[0]] and report[ids[0]]["faults"] == 1 and report[ids[0]]["completeness"] == 1
    assert f"fault tolerance of {ids[0]}" in cli("results", "compare", *ids).out
    html = tmp_path / "report.html"
    assert cli("results", "report", *ids, "-o", str(html)).code == 0
    page = html.read_text()
    assert "<h2>Fault tolerance</h2>" in page and "kill-step@0s" in page


def test_a_local_sweep_with_a_chaos_file_records_each_point_once_with_its_faults(
        recipes: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    _hog(recipes, "{max: 0}")
    chaos = tmp_path / "chaos.yaml"
    chaos.write_text("chaos:\n  - inject: kill-step@0s\n    points: [1]\n")
    result = cli("sweep", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--matrix", "what=a,sleep,c",
                 "--retries", "1", "--chaos", str(chaos), "--json")
    assert result.code == 0, result.err
    sweep = json.loads(result.out)
    assert [p["index"] for p in sweep["points"]] == [0, 1, 2] and sweep["failed"] == 0
    documents = {p["index"]: _result(Path(p["result_path"]).parent) for p in sweep["points"]}
    assert len({d["run_id"] for d in documents.values()}) == 3
    assert [(a["number"], a["fault"]) for a in documents[1]["attempts"]] == [(1, "killed"), (2, None)]
    assert "attempts" not in documents[0] and "attempts" not in documents[2]
    assert documents[1]["provenance"]["injections"][0]["spec"] == "kill-step@0s"
    compared = cli("results", "compare", "--sweep", sweep["sweep_id"], "--json")
    report = json.loads(compared.out)["fault_tolerance"]
    assert (report["runs"], report["completed"], report["faults"], report["recovered"]) == (3, 3, 1, 1)


def test_a_bad_chaos_file_stops_the_sweep_before_anything_runs(recipes: Any, cli: Callable[..., Any],
                                                                tmp_path: Path) -> None:
    _hog(recipes)
    chaos = tmp_path / "chaos.yaml"
    chaos.write_text("chaos:\n  - inject: kill-step@0s\n    points: [7]\n")
    result = cli("sweep", "--recipes", str(recipes.dir), "--tags", "hog-ft", "--matrix", "what=a,b", "--chaos",
                 str(chaos))
    assert result.code == 2 and len(result.err_lines) == 1 and "chaos.0.points" in result.err


PY_STEP = '''
from cmx_core.errors import StepFailed


def train(ctx):
    """Attempt 1 saves a checkpoint, leaves a half-written file and fails; attempt 2 resumes."""
    if ctx.attempt == 1:
        ctx.save_checkpoint("state.txt", "7")
        (ctx.checkpoint_dir / ".state.txt.123.tmp").write_text("half")
        raise StepFailed("lost the node (simulated by the step itself)")
    assert not (ctx.checkpoint_dir / ".state.txt.123.tmp").exists()
    return {"resumed_at": int((ctx.checkpoint_dir / "state.txt").read_text())}
'''


def test_a_python_step_gets_its_checkpoint_and_attempt_number(recipes: Any, cli: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    (recipes.dir / "ckpt_step.py").write_text(PY_STEP)
    recipes("ckpt", """
        name: ckpt
        tags: [ckpt-ft]
        summary: a python step with a checkpoint
        cache: false
        steps:
          - uses: python
            id: train
            checkpoint: true
            retries: 1
            with: {function: 'ckpt_step:train'}
        outputs: [resumed_at]
        """)
    result = cli("run", "--recipes", str(recipes.dir), "--tags", "ckpt-ft", "--output", str(tmp_path / "run"))
    assert result.code == 0, result.err
    document = _result(tmp_path / "run")
    assert document["outputs"]["resumed_at"] == 7
    assert [(a["fault"], a["resumed"]) for a in document["attempts"]] == [("exit_code", False), (None, True)]


SLOW_ONCE = """
name: slow-once
tags: [slow-once]
summary: hangs on its first job, is quick on the next
cache: false
inputs:
  marker: {type: string}
steps:
  - uses: shell
    with: {cmd: [sh, -c, "if [ -e \\"$0\\" ]; then exit 0; fi; : > \\"$0\\"; sleep 60", "{{ inputs.marker }}"]}
"""


def test_a_remote_job_that_times_out_is_resubmitted_by_the_policy(recipes: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = plugins.load_registry(extra=[("subprocess-exec", subprocess_executor)])
    monkeypatch.setattr(plugins, "_REGISTRY", loaded)
    recipes("slow", SLOW_ONCE)
    result = engine.run_tags("slow-once", {"marker": str(tmp_path / "marker")}, recipes_dirs=[recipes.dir],
                        executor="subprocess", options={"timeout_s": "15"},  # the 2nd job must start in time
                        recovery=Recovery(RetryPolicy(1, 0, ("timeout",))))
    jobs = [(a["step"], a["number"], a["fault"]) for a in result.document["attempts"]]
    assert jobs == [("subprocess job", 1, "timeout"), ("subprocess job", 2, None)]
    assert (result.run_dir / "remote-attempt-1").is_dir() and (result.run_dir / "remote" / "result.json").is_file()
