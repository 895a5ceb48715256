"""Every Ray record true (docs/faults.md, "What Ray recovers and what cmx records"), with a
fault made from outside cmx on a real local cluster of a head and two worker nodes
(tests/multinode.py): the raylet of the node that runs the task, and every process under it,
``kill -9``'d by PID, as a machine that fails takes them all. Ray marks the node dead and
runs the task again on the other node by itself (``max_retries``): the result says so (the
lost run an attempt, its fault ``node_lost``), the retry resumed from the lost run's
checkpoint (``storage=``, shared by the nodes), and the run's wall time starts at its first
run, its queue time beside it. A run that ends after a later run started is fenced: it
hands back nothing, and a result from it is refused. Every wait is bounded; no assertion
depends on the machine's speed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from cmx_core.testing.chaos import counter_recipe, wait_until
from cmx_ray import cluster, executor, far, runs

from .multinode import Workers

BOUND_S = 300.0
COUNTER = counter_recipe("test-ray-counter", "raycounter", to=12)


def _until(predicate: Callable[[], Any], what: str, proc: subprocess.Popen[str]) -> Any:
    return wait_until(predicate, what, proc, BOUND_S)


def _count(storage: Path) -> int:
    """The count the first run's checkpoint holds (0: none yet)."""
    counts = []
    for path in storage.glob("*/attempt-0/remote/checkpoints/*/count/progress"):
        text = path.read_text().strip() if path.exists() else ""
        counts.append(int(text) if text.isdigit() else 0)
    return max(counts, default=0)


def _node_of_first_run(storage: Path) -> psutil.Process:
    """The raylet of the node running the task's first run: an ancestor of the far process
    (the one working in ``<storage>/<task>/attempt-0``)."""
    for process in psutil.process_iter():
        try:
            if "/attempt-0" in process.cwd() and process.cwd().startswith(str(storage)):
                return next(p for p in process.parents() if (p.cmdline() or [""])[0].endswith("/raylet"))
        except (psutil.Error, StopIteration):
            continue
    raise AssertionError(f"no process works in {storage}/*/attempt-0 under a raylet")


def _kill_node(raylet: psutil.Process) -> None:
    """SIGKILL the raylet and everything under it, by PID."""
    below = raylet.children(recursive=True)
    for process in (raylet, *below):
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_task_ray_ran_again_after_its_node_died_is_recorded_and_resumes(ray_workers: Workers, cmx_home: Path,
                                                                          tmp_path: Path) -> None:
    recipes, storage = tmp_path / "recipes", tmp_path / "shared"
    recipes.mkdir()
    (recipes / "counter.yaml").write_text(COUNTER)
    run = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "--recipes", str(recipes),
                            "--tags=test,raycounter", "--retries=1", "--retry-on=node_lost", "--executor=ray",
                            f"--executor-opt=address={ray_workers.address}", "--executor-opt=env=CMX_HOME",
                            f"--executor-opt=storage={storage}", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: _count(storage) >= 3, "a count of 3 in the first run's checkpoint", run)
        _kill_node(_node_of_first_run(storage))
        out, err = run.communicate(timeout=BOUND_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        ray_workers.add()  # the next test gets two workers again
    assert run.returncode == 0, err[-2000:]
    document = json.loads(out)
    assert document["status"] == "completed"
    assert document["outputs"]["attempt"] == "2" and int(document["outputs"]["start"]) >= 3  # counted on
    assert [(a["step"], a["number"], a["fault"], a["resumed"]) for a in document["attempts"]] == \
        [("ray job", 1, "node_lost", False), ("ray job", 2, None, False), ("count", 2, None, True)]
    assert [f["class"] for f in document["faults"]] == ["node_lost"]
    lost, retry = document["attempts"][0], document["attempts"][1]
    assert lost["ended"] <= retry["started"] and "Ray ran the task again" in lost["message"]
    assert abs(_epoch(document["timing"]["started_at"]) - lost["started"]) < 0.01  # from the first run's start
    assert document["timing"]["queue_s"] >= 0.0
    run_dir = next(cmx_home.glob("data/runs/*/result.json")).parent
    assert (run_dir / "remote-attempt-1" / "checkpoints").is_dir()  # the lost run's far directory, kept
    assert list(storage.iterdir()) == []  # the task's directory in the shared storage, removed


def test_a_point_queued_behind_others_has_its_queue_time_beside_its_own_wall_time(
        ray_workers: Workers, cmx_home: Path, tmp_path: Path) -> None:
    """Three points of 3 s on two 1-CPU workers, submitted at once: the third waits for one
    of the first two (at least its 3 s sleep) in Ray's queue; that wait is its ``queue_s``,
    and its wall time is its own run (its 3 s sleep at least)."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "sleeper.yaml").write_text(SLEEPER)
    sweep = subprocess.run([sys.executable, "-m", "cmx_core", "sweep", "--recipes", str(recipes),
                            "--tags=test,raysleeper", "--matrix", "n=1,2,3", "-j", "3", "--executor=ray",
                            f"--executor-opt=address={ray_workers.address}", "--executor-opt=env=CMX_HOME", "--json"],
                           capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    timings = [json.loads(Path(p["result_path"]).read_text())["timing"] for p in json.loads(sweep.stdout)["points"]]
    assert all(t["wall_s"] >= 3.0 and t["queue_s"] >= 0.0 for t in timings)
    assert max(t["queue_s"] for t in timings) >= 3.0  # one waited for a 3 s run: queued, not in its wall time


SLEEPER = """\
name: test-ray-sleeper
tags: [test, raysleeper]
summary: sleeps 3 s, then prints its input
cache: false
inputs:
  n: {type: integer, default: 0}
outputs: [n]
steps:
  - uses: shell
    with:
      cmd: [sh, -c, 'sleep 3; echo "n=$1"', sh, "{{ inputs.n }}"]
      parse: kv
"""



def test_a_run_that_ends_after_a_later_run_started_is_fenced(ray_head: str, tmp_path: Path) -> None:
    """Fencing, on the session's real Ray head (its key-value store): run 1 of a task ends after
    run 2 has stamped its start (while run 1 ran), as a run cut off from the head that lived on
    would. It hands back nothing and says so (in the store and in its directory in the shared
    storage, which stays for the lost runs' record); and a result from run 1 reaching the
    driver all the same is refused. The driver's reading clears the task's entries."""
    token, storage = uuid.uuid4().hex, tmp_path / "shared" / "task"
    script = ("import pathlib, time\nwhile not pathlib.Path('../go').exists(): time.sleep(0.05)\n"
              "pathlib.Path('remote').mkdir(); pathlib.Path('remote/result.json').write_text('{}')")

    def later_run() -> None:  # run 2 starts elsewhere while run 1 runs
        while not (storage / "attempt-0" / far.LOCK_NAME).exists():
            time.sleep(0.05)
        runs.stamp(token, 1, time.time())
        (storage / "go").touch()

    with cluster.session(ray_head):  # this process a driver of the session's head (as the far task's is)
        thread = threading.Thread(target=later_run, daemon=True)
        thread.start()
        result = far.run_far([sys.executable, "-c", script], {far.TOKEN_ENV: token}, b"{}", 10**6, str(storage))
        thread.join(timeout=BOUND_S)
        assert result.fenced and result.files == {} and result.attempt == 0  # this process is run 1 (number 0)
        assert "after run number 1 started: fenced" in result.error
        assert "fenced" in (storage / "attempt-0" / "remote" / "fenced").read_text()
        handle = executor.RayHandle(None, None, None, "", token, result=replace(result, fenced=False))
        assert "refused (fenced)" in executor._refused(handle)  # the driver's own check, on the run numbers
        seen = runs.read(token)
        assert sorted(seen.starts) == [0, 1] and seen.fenced == frozenset({0})
        assert runs.read(token) == runs.TaskRuns()  # cleared


def test_a_run_of_a_given_up_submission_that_starts_late_runs_nothing(ray_head: str, tmp_path: Path) -> None:
    """Ray may start again a submission the driver gave up (once the cut node's connection
    broke); a later submission's run (number 1000) has started: the late run is fenced before
    it runs anything."""
    token, storage, marker = uuid.uuid4().hex, tmp_path / "shared" / "task", tmp_path / "ran"
    with cluster.session(ray_head):
        runs.stamp(token, 1000, time.time())
        result = far.run_far([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], {far.TOKEN_ENV: token}, b"{}",
                             10**6, str(storage))
        runs.read(token)  # cleared
    assert result.fenced and "nothing run" in result.error and not marker.exists()


def test_a_run_cut_off_from_the_store_is_fenced_by_the_shared_storage(tmp_path: Path) -> None:
    """A run whose node is cut off from the head cannot ask the store; the shared storage
    holds the later run's directory, and that fences it (no Ray here: the store is not asked
    once the storage has answered)."""
    storage = tmp_path / "shared" / "task"
    script = ("import pathlib\npathlib.Path('../attempt-1000').mkdir()\n"
              "pathlib.Path('remote').mkdir(); pathlib.Path('remote/result.json').write_text('{}')")
    result = far.run_far([sys.executable, "-c", script], {far.TOKEN_ENV: uuid.uuid4().hex}, b"{}", 10**6,
                         str(storage))
    assert result.fenced and "after run number 1000 started" in result.error
    assert (storage / "attempt-0" / "remote" / "fenced").is_file()
    assert json.loads((storage / "attempt-0" / "remote" / "result.json").read_text()) == {}  # kept, not sent
