"""Faults made from outside cmx on the test bed under a running cmx sweep on Slurm
(docs/faults.md, docs/testbed.md): a node's link cut (``ip link set ... down`` on the bed's
bridge), every process of a node killed (``kill -9`` of each PID in its namespace, slurmd
included), and the sweep driver killed (SIGKILL by PID) then resumed.

Four checkpointing points run as one job array, two tasks on each of the bed's two nodes.
Node 2 is struck: its slurmd stops answering, Slurm sets the node down past
``SlurmdTimeout`` and ends its two tasks ``NODE_FAIL`` (behind a cut link their processes
run on); cmx resubmits them under the policy, and the node comes back (the link up, or
slurmd started again). Every point is
recorded once and completed, none ran more often than its policy allows, each lost task's
point records the lost attempt and its fault, and its retry resumed from the lost attempt's
checkpoint. The bed is this module's own (no Ray: the cut would leave the session bed's Ray
worker declared dead), started and stopped by PID. Every wait is bounded; no assertion
depends on the machine's speed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cmx_core.testing.chaos import counter_recipe
from tests.netbed import bed as netbed
from tests.netbed.conftest import running_bed

BOUND_S = 400.0
COUNTER = counter_recipe("test-bed-counter", "bedcounter", to=120)


@pytest.fixture(scope="module")
def slurm_bed() -> Iterator[netbed.Bed]:
    """A 2-node bed of this module's own, Slurm only; stopped (all it made removed) after."""
    with running_bed(ray=False) as started:
        yield started


def _until(predicate: Callable[[], Any], what: str, proc: subprocess.Popen[str] | None = None) -> Any:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"cmx ended (exit {proc.returncode}) before {what}: {proc.communicate()[1][-2000:]}")
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {BOUND_S:g} s")


def _tasks(bed: netbed.Bed) -> dict[int, str]:
    """The running tasks of the sweep's array: point index -> node."""
    out = bed.run(1, ["squeue", "-h", "-r", "-t", "RUNNING", "-n", "cmx-sweep-test-bed-counter", "-o", "%K %N"],
                  timeout=60).stdout
    return {int(index): node for index, node in (line.split() for line in out.splitlines() if line.strip())
            if index.isdigit()}


def _no_leftovers(bed: netbed.Bed) -> None:
    """Cancel any task an earlier test of the module left on the bed (a failed one kills its
    driver, not its array), so this test counts only its own."""
    bed.run(1, ["scancel", "-n", "cmx-sweep-test-bed-counter"], timeout=60)
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        out = bed.run(1, ["squeue", "-h", "-n", "cmx-sweep-test-bed-counter", "-o", "%i"], timeout=60).stdout
        if not out.strip():
            return
        time.sleep(0.5)
    raise AssertionError(f"the bed's earlier tasks were not gone within {BOUND_S:g} s")


def _all_four(tasks: dict[int, str]) -> dict[int, str] | None:
    return tasks if len(tasks) == 4 else None


def _counted(points: Path) -> int:
    """The least count the running points' checkpoints hold (0 while one has none)."""
    counts = []
    for index in range(4):
        found = list(points.glob(f"point-{index}/remote/checkpoints/*/count/progress"))
        text = found[0].read_text().strip() if found else ""
        counts.append(int(text) if text.isdigit() else 0)
    return min(counts)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _array(stage: Path) -> str:
    return str(json.loads((stage / "slurm-job.json").read_text())["array"])


def _link(bed: netbed.Bed, node: int, state: str) -> None:
    subprocess.run(["ip", "-n", bed.hub, "link", "set", f"v{node}", state], check=True, timeout=30)


def _node_back(bed: netbed.Bed, node: str) -> bool:
    """True once Slurm has the node in service again (ReturnToService=2; resumed here if not)."""
    state = bed.run(1, ["sinfo", "-h", "-n", node, "-o", "%t"], timeout=60).stdout.strip()
    if state and not any(word in state for word in ("down", "drain", "fail", "unk")):
        return True
    bed.run(1, ["scontrol", "update", f"nodename={node}", "state=resume"], timeout=60)
    return False


def _kill_node(bed: netbed.Bed, node: int) -> None:
    """SIGKILL every process in node ``node``'s network namespace (slurmd, the tasks), by PID."""
    for pid in netbed.pids_in(bed.nodes[node - 1].netns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _strike(bed: netbed.Bed, fault: str) -> None:
    if fault == "link":
        _link(bed, 2, "down")
    else:
        _kill_node(bed, 2)


def _restore(bed: netbed.Bed, fault: str) -> None:
    """The struck node back: its link up, or its slurmd started again (as the bed starts it)."""
    if fault == "link":
        _link(bed, 2, "up")
        return
    pidfile = bed.work / "slurm" / "slurmd-cmxn2.pid"
    alive = pidfile.exists() and pidfile.read_text().strip().isdigit() and \
        Path(f"/proc/{pidfile.read_text().strip()}").exists()
    if not alive:
        bed.run(2, ["slurmd", "-f", str(bed.slurm_conf), "-N", "cmxn2"], timeout=60)


@pytest.mark.parametrize("fault", ["link", "kill"])
def test_a_struck_node_under_a_sweep_is_recovered_and_recorded_truly(slurm_bed: netbed.Bed, tmp_path: Path,
                                                                     fault: str) -> None:
    bed, home, recipes = slurm_bed, tmp_path / "home", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "counter.yaml").write_text(COUNTER)
    _no_leftovers(bed)
    sweep = subprocess.Popen(bed.argv(1, [sys.executable, "-m", "cmx_core", "sweep", "--recipes", str(recipes),
                                          "--tags=test,bedcounter", "--matrix", "x=1,2,3,4", "-j", "4",
                                          "--retries=1", "--retry-on=node_lost", "--executor=slurm",
                                          "--executor-opt=poll_s=0.5", "--json"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=bed.env(CMX_HOME=str(home)))
    struck = False
    try:
        placed = _until(lambda: _all_four(_tasks(bed)), "four tasks running", sweep)
        points = next(home.glob("data/sweeps/sw-*"))
        _until(lambda: _counted(points) >= 2, "a count of 2 in every point's checkpoint", sweep)
        lost = sorted(index for index, node in placed.items() if node == "cmxn2")
        assert lost, f"no task on cmxn2: {placed}"
        first = {index: _array(points / f"point-{index}" / "remote-stage") for index in lost}
        _strike(bed, fault)
        struck = True
        _until(lambda: all(_array(points / f"point-{i}" / "remote-stage") != first[i] for i in lost),
               "the lost tasks resubmitted", sweep)
        _restore(bed, fault)
        struck = False
        out, err = sweep.communicate(timeout=BOUND_S)
    finally:
        if struck:
            _restore(bed, fault)
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()
    assert sweep.returncode == 0, err[-2000:]
    recorded = {p["index"]: json.loads(Path(p["result_path"]).read_text()) for p in json.loads(out)["points"]}
    assert sorted(recorded) == [0, 1, 2, 3] and len(list(points.glob("point-*/result.json"))) == 4  # once each
    for index, document in recorded.items():
        stage = points / f"point-{index}" / "remote-stage"
        runs = [line for line in (stage / "starts").read_text().splitlines() if line.strip()]
        assert document["status"] == "completed", (index, document.get("error"))
        assert _epoch(document["timing"]["started_at"]) >= float(runs[0].split()[0]) - 0.01  # its own wall time
        assert document["timing"]["queue_s"] >= 0.0  # its wait in the queue, beside it
        if index in lost:
            assert [(a["step"], a["number"], a["fault"], a["resumed"]) for a in document["attempts"]] == \
                [("slurm job", 1, "node_lost", False), ("slurm job", 2, None, False), ("count", 2, None, True)]
            assert [f["class"] for f in document["faults"]] == ["node_lost"]
            assert document["outputs"]["attempt"] == "2" and int(document["outputs"]["start"]) >= 2  # resumed
            assert len(runs) == 2  # the lost run and its one retry: no more than the policy allows
        else:
            assert document.get("attempts", []) == [] and len(runs) == 1
    assert _until(lambda: _node_back(bed, "cmxn2"), "cmxn2 back in service")


def test_a_killed_sweep_driver_on_the_bed_is_resumed_and_adopts_its_tasks(slurm_bed: netbed.Bed,
                                                                           tmp_path: Path) -> None:
    """The sweep driver on node 1 killed with SIGKILL (by PID) while its four tasks run on both
    nodes; ``cmx sweep --resume`` on node 1 adopts them: each point recorded once in its first
    run directory, each task run once, nothing marked interrupted."""
    bed, home, recipes = slurm_bed, tmp_path / "home", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "counter.yaml").write_text(COUNTER)
    _no_leftovers(bed)
    sweep = subprocess.Popen(bed.argv(1, [sys.executable, "-m", "cmx_core", "sweep", "--recipes", str(recipes),
                                          "--tags=test,bedcounter", "--to=10", "--matrix", "x=1,2,3,4", "-j", "4",
                                          "--executor=slurm", "--executor-opt=poll_s=0.5", "--json"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=bed.env(CMX_HOME=str(home)))
    try:
        placed = _until(lambda: _all_four(_tasks(bed)), "four tasks running", sweep)
        assert sorted(set(placed.values())) == ["cmxn1", "cmxn2"], placed
        os.kill(sweep.pid, signal.SIGKILL)  # nsenter runs the driver in its own process: the driver's PID
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.communicate()
    assert sweep.returncode == -signal.SIGKILL  # the driver itself died
    folder = next(home.glob("data/sweeps/sw-*"))
    resumed = bed.run(1, [sys.executable, "-m", "cmx_core", "sweep", "--resume", folder.name, "--json"],
                      timeout=BOUND_S, CMX_HOME=str(home))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    points = json.loads(resumed.stdout)["points"]
    assert sorted(p["index"] for p in points) == [0, 1, 2, 3]
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [f"point-{i}" for i in range(4)]  # no -r1
    for point in points:
        run_dir = folder / f"point-{point['index']}"
        document = json.loads((run_dir / "result.json").read_text())
        assert document["status"] == "completed" and document.get("attempts", []) == []
        assert len((run_dir / "remote-stage" / "starts").read_text().splitlines()) == 1  # its task ran once
