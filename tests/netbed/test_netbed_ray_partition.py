"""A Ray worker node cut off from the head on the test bed (docs/faults.md, "A node cut off
from the head"): its link cut (``ip link set ... down`` on the bed's bridge) under a running
``cmx run --executor ray``, the run's processes living on behind the cut.

Ray declares the node dead, but runs nothing again while the connection to the task's worker
stands; cmx gives the run up, runs the task again on the other worker (resuming from the cut
run's checkpoint in the shared storage), and fences the cut run: when it ends it finds the
later run and hands back nothing, and the record says its late result was refused.

The order of events is made by the test, not by the machine's speed: the cut run's processes
are held (SIGSTOP) from the cut until the later run has started, and the later run's until
the cut run has ended. The bed is this module's own (3 nodes, the Ray head without CPUs, so
the task runs on a worker node and its rerun on the other); every wait is bounded."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

from cmx_core.testing.chaos import counter_recipe, wait_until
from tests.netbed import bed as netbed
from tests.netbed.conftest import running_bed

BOUND_S = 400.0
COUNTER = counter_recipe("bed-ray-counter", "bedraycounter", to=30)


@pytest.fixture(scope="module")
def ray_bed() -> Iterator[netbed.Bed]:
    """3 nodes: the Ray head (no CPUs) on node 1, a 1-CPU worker on nodes 2 and 3."""
    with running_bed(nodes=3, head_cpus=0) as started:
        yield started


def _until(predicate: Callable[[], Any], what: str, proc: subprocess.Popen[str]) -> Any:
    return wait_until(predicate, what, proc, BOUND_S, tick_s=0.3)


def _far_run(storage: Path, number: int) -> psutil.Process | None:
    """The far ``cmx run`` of run ``number``: the process working in its directory whose parent
    does not. Not the first one found: PIDs wrap (pid_max is 32768 here), so a step's ``sleep``
    can have a lower PID than the cmx run above it, and holding only that would hold nothing."""
    inside = {process.pid: process for process in psutil.process_iter(["cwd", "ppid"])
              if (cwd := process.info.get("cwd") or "").startswith(str(storage))
              and Path(cwd).name == f"attempt-{number}"}
    return next((process for process in inside.values() if process.info.get("ppid") not in inside), None)


def _count(storage: Path) -> int:
    found = list(storage.glob("*/attempt-0/remote/checkpoints/*/count/progress"))
    text = found[0].read_text().strip() if found else ""
    return int(text) if text.isdigit() else 0


def _signal_tree(root: psutil.Process, sig: signal.Signals,
                 also: Sequence[psutil.Process] = ()) -> list[psutil.Process]:
    """Send ``sig`` to ``root``, its descendants and ``also`` (those held before: one whose
    parent ended is no longer found below ``root``); the processes signalled."""
    tree = [root, *root.children(recursive=True)]
    for process in [*tree, *also]:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(sig)
    return tree


def _node_of(bed: netbed.Bed, pid: int) -> int:
    name = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True, timeout=30,
                          check=True).stdout.strip()
    return next(node.index for node in bed.nodes if node.netns == name)


def _link(bed: netbed.Bed, node: int, state: str) -> None:
    subprocess.run(["ip", "-n", bed.hub, "link", "set", f"v{node}", state], check=True, timeout=30)


def test_a_run_cut_off_from_the_head_is_given_up_rerun_and_fenced(ray_bed: netbed.Bed, tmp_path: Path) -> None:
    bed, home, recipes, storage = ray_bed, tmp_path / "home", tmp_path / "recipes", tmp_path / "shared"
    recipes.mkdir()
    (recipes / "counter.yaml").write_text(COUNTER)
    run = subprocess.Popen(bed.argv(1, [sys.executable, "-m", "cmx_core", "run", "--recipes", str(recipes),
                                        "--tags=test,bedraycounter", "--retries=1", "--retry-on=node_lost",
                                        "--executor=ray", f"--executor-opt=address={bed.ray_address}",
                                        f"--executor-opt=storage={storage}", "--json"]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=bed.env(CMX_HOME=str(home)))
    cut = held = None
    stopped: list[psutil.Process] = []
    try:
        _until(lambda: _count(storage) >= 2, "a count of 2 in the first run's checkpoint", run)
        first = _until(lambda: _far_run(storage, 0), "the first run's far process", run)
        cut = _node_of(bed, first.pid)
        assert cut in (2, 3), cut  # the head has no CPUs
        _link(bed, cut, "down")
        cut_at = time.time()
        stopped = _signal_tree(first, signal.SIGSTOP)  # it lives on behind the cut, held until the rerun has started
        held = first
        rerun = _until(lambda: _far_run(storage, 1000), "the run given up and the task run again", run)
        stopped_rerun = _signal_tree(rerun, signal.SIGSTOP)  # held until the cut run has ended
        _signal_tree(first, signal.SIGCONT, also=stopped)
        held, stopped = rerun, stopped_rerun
        fence = _until(lambda: next(storage.glob("*/attempt-0/remote/fenced"), None), "the cut run fenced", run)
        fenced_text = fence.read_text()
        _signal_tree(rerun, signal.SIGCONT, also=stopped)
        held = None
        out, err = run.communicate(timeout=BOUND_S)
    finally:
        if held is not None:
            _signal_tree(held, signal.SIGCONT, also=stopped)
        if cut is not None:
            _link(bed, cut, "up")
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err[-3000:]
    assert "after run number 1000 started: fenced" in fenced_text
    document = json.loads(out)
    assert document["status"] == "completed"
    assert document["outputs"]["attempt"] == "2" and int(document["outputs"]["start"]) >= 2  # resumed
    attempts = document["attempts"]
    assert [(a["step"], a["number"], a["fault"]) for a in attempts[:2]] == \
        [("ray job", 1, "node_lost"), ("ray job", 2, None)]
    lost = attempts[0]
    assert "cmx gave the run up" in lost["message"] and "late result was refused (fenced)" in lost["message"]
    assert lost["ended"] >= cut_at
    assert [f["class"] for f in document["faults"]] == ["node_lost"]
    run_dir = next(home.glob("data/runs/*/result.json")).parent
    landed = json.loads((run_dir / "ray-job.json").read_text())
    assert landed["node"]["hostname"] == f"cmxn{5 - cut}"  # the other worker's result, the only one
    assert (run_dir / "remote-attempt-1" / "fenced").is_file()  # the cut run's directory, kept and marked
    print(f"cut -> given up: {lost['ended'] - cut_at:.1f} s")
