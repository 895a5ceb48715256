"""Recovery on the Slurm executor (docs/faults.md), on the loopback single-node cluster: the
chaos matrix (each injected fault recovered by the far engine's retry, a job whose node
``kill-worker`` set down requeued by Slurm itself, each point recorded once; exit code 2
never retried), ``--requeue`` from a policy that retries lost nodes or preemptions, and a
lost node not retried when the policy does not name it. The kill-worker cell takes about
three minutes: Slurm holds a requeued job back (its begin time) before it runs again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cmx_core.api import RetryPolicy
from cmx_core.testing import execution_request
from cmx_core.testing.chaos import CHAOS_TAG, UnderTest, chaos_problems, chaos_recipe, recorded_result
from cmx_core.testing.runs import Recovery, engine
from cmx_slurm import worker
from cmx_slurm.executor import requeue_args
from cmx_slurm.testing import Cluster


def test_the_chaos_matrix_on_the_loopback_slurm(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    assert chaos_problems(recipes, UnderTest("slurm", ["poll_s=0.2"], kill_worker=True), timeout_s=420) == []
    assert _node_state() == "idle"  # the node set down was resumed


def test_a_lost_node_the_policy_does_not_name_is_not_retried(slurm: Cluster, cmx_home: Path,
                                                             tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "chaos-matrix.yaml").write_text(chaos_recipe())
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "--recipes", str(recipes), "--tags",
                           f"test,{CHAOS_TAG}", "--what=work", "--retries=1", "--retry-on=oom", "--inject=kill-worker",
                           "--executor=slurm", "--executor-opt=poll_s=0.2", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    document = recorded_result(proc.stderr)
    assert proc.returncode == 1 and document is not None, proc.stderr[-2000:]
    assert document["status"] == "error"
    assert [(a["number"], a["fault"], a["injected"]) for a in document["attempts"]] == [(1, "node_lost", "kill-worker")]
    assert "NODE_FAIL" in document["error"]["message"]
    assert _node_state() == "idle"


def _node_state() -> str:
    return subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=60,
                          check=False).stdout.strip()


def test_requeue_follows_the_policy(cmx_home: Path, tmp_path: Path) -> None:
    the_plan = engine.plan("demo,sort")
    assert requeue_args(execution_request(the_plan, tmp_path / "a")) == ["--no-requeue"]
    lost = Recovery(RetryPolicy(2, 0, ("node_lost", "preempted")))
    assert requeue_args(execution_request(the_plan, tmp_path / "b", recovery=lost)) == ["--requeue"]
    oom = Recovery(RetryPolicy(2, 0, ("oom",)))
    assert requeue_args(execution_request(the_plan, tmp_path / "c", recovery=oom)) == ["--no-requeue"]


def test_array_tasks_lost_with_their_node_are_resubmitted_as_a_new_array(slurm: Cluster, cmx_home: Path,
                                                                         tmp_path: Path) -> None:
    """A two-point sweep runs as one job array without Slurm's requeue; its node is set down
    while both far runs run: both end NODE_FAIL, and the batch resubmits them as a new array
    (``--array=0,1``) under the policy, so each point is recorded once, with the lost attempt
    (its far directory kept as ``remote-attempt-1``) and the one that succeeded."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "chaos-matrix.yaml").write_text(chaos_recipe())
    sweep = subprocess.Popen([sys.executable, "-m", "cmx_core", "sweep", "--recipes", str(recipes), "--tags",
                              f"test,{CHAOS_TAG}", "--matrix", "what=sleep,sleep", "-j", "2", "--retries=1",
                              "--retry-on=node_lost", "--executor=slurm", "--executor-opt=poll_s=0.2", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        node = _when_running(sweep, "cmx-sweep-chaos-matrix", tasks=2, timeout_s=240)
        _when_far_runs_began(sweep, cmx_home, points=2, timeout_s=120)
        down = subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=cmx test"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert down.returncode == 0, down.stderr
        worker.resume(node)
        out, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()
    assert sweep.returncode == 0, err[-2000:]
    points = json.loads(out)["points"]
    assert sorted(p["index"] for p in points) == [0, 1]
    arrays = set()
    for point in points:
        document = json.loads(Path(point["result_path"]).read_text())
        assert document["status"] == "completed"
        assert [(a["number"], a["step"], a["fault"]) for a in document["attempts"]] == \
            [(1, "slurm job", "node_lost"), (2, "slurm job", None)]
        run_dir = Path(point["result_path"]).parent
        assert (run_dir / "remote-attempt-1").is_dir(), sorted(p.name for p in run_dir.iterdir())
        record = json.loads((run_dir / "remote-stage" / "slurm-job.json").read_text())
        assert "--array=0,1" in record["sbatch"] and "--no-requeue" in record["sbatch"]
        arrays.add(record["array"])
    assert len(arrays) == 1  # the two lost tasks went into one new array
    assert _node_state() == "idle"


def _when_far_runs_began(sweep: subprocess.Popen[str], cmx_home: Path, points: int, timeout_s: float) -> None:
    """Once the far run of ``points`` points has made its run directory (``remote``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and sweep.poll() is None:
        if len(list(cmx_home.glob("data/sweeps/*/point-*/remote"))) >= points:
            return
        time.sleep(0.2)
    raise AssertionError(f"the far runs of {points} points did not begin within {timeout_s:g} s")


def _when_running(sweep: subprocess.Popen[str], name: str, tasks: int, timeout_s: float) -> str:
    """The node once ``tasks`` jobs named ``name`` run there (squeue), while ``sweep`` runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and sweep.poll() is None:
        rows = subprocess.run(["squeue", "-h", "-n", name, "-t", "RUNNING", "-o", "%N"],
                              capture_output=True, text=True, timeout=60, check=False).stdout.split()
        if len(rows) >= tasks:
            return rows[0]
        time.sleep(0.2)
    queue = subprocess.run(["squeue", "-h", "-o", "%i %j %T %N %r"], capture_output=True, text=True, timeout=60,
                           check=False).stdout
    raise AssertionError(f"{tasks} tasks named {name} did not run within {timeout_s:g} s (sweep exit "
                         f"{sweep.poll()}); the queue: {queue}")
