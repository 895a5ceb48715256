"""`cmx sweep --resume ID`: only the points without a successful result run again; a point
is never recorded twice; a `kill -9` of the sweep's driver halfway, then a resume, gives the
same point results as a sweep that was never interrupted, point by point. Every sweep here
is a real `cmx sweep` process (or in-process call) on the local executor, bounded in time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from cmx_core import paths
from cmx_core.results.store import ResultStore
from cmx_core.sweep.batch import PointOutcome
from cmx_core.sweep.state import SweepSpec, record_point

SQUARE = """\
name: test-resume-square
tags: [test, sweep, square]
summary: prints the square of n after a pause; fails while the file flag names is missing
inputs:
  n: {type: integer, default: 0}
  pause: {type: number, default: 0}
  flag: {type: string, default: ""}
outputs: [square]
steps:
  - uses: shell
    with:
      cmd: [sh, -c, 'test -z "$1" || test -e "$1" || exit 3; sleep "$2"; echo "square=$(($3 * $3))"',
            sh, "{{ inputs.flag }}", "{{ inputs.pause }}", "{{ inputs.n }}"]
      parse: kv
"""
POINTS = 6
BOUND_S = 240  # every sweep process here ends (or is killed) within this


def _cmx(*args: str) -> list[str]:
    return [sys.executable, "-m", "cmx_core", *args]


def _sweep_args(directory: Path, *extra: str) -> list[str]:
    return ["sweep", "--tags=test,sweep,square", "--recipes", str(directory), "--no-cache",
            "--matrix", "n=" + ",".join(str(n) for n in range(1, POINTS + 1)), *extra, "--json"]


def point_results(manifest: dict[str, Any]) -> dict[int, tuple[dict[str, str], str, int, Any]]:
    """Each point's inputs, status, exit code and stored outputs, by index."""
    store = ResultStore(paths.results_db())
    found = {}
    for point in manifest["points"]:
        outputs = store.get(point["run_id"]).document["outputs"] if point["run_id"] else None
        found[point["index"]] = (point["point"], point["status"], point["exit_code"], outputs)
    return found


def successes(folder: Path) -> dict[int, int]:
    """How many successful results of this sweep each point's run directories hold."""
    counts: dict[int, int] = {}
    for path in folder.glob("point-*/result.json"):
        document = json.loads(path.read_text())
        if document["status"] != "error":
            index = document["provenance"]["sweep"]["index"]
            counts[index] = counts.get(index, 0) + 1
    return counts


def _wait_for(predicate: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {BOUND_S} s")
        time.sleep(0.05)


def kill_halfway(argv: list[str]) -> Path:
    """Start the sweep ``argv``, SIGKILL its driver once half of its points are recorded
    (bounded in time); the sweep's folder."""
    sweeps = paths.data_dir() / "sweeps"
    sweeps.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in sweeps.iterdir()}
    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: len({p.name for p in sweeps.iterdir()} - before) > 0, "sweep directory", driver)
        folder = next(sweeps / name for name in {p.name for p in sweeps.iterdir()} - before)
        _wait_for(lambda: len(list(folder.glob("point-[0-9].json"))) >= POINTS // 2, "half of the points",
                  driver)
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        driver.wait(timeout=BOUND_S)
    recorded = {int(p.stem.split("-")[1]) for p in folder.glob("point-[0-9].json")}
    assert POINTS // 2 <= len(recorded) < POINTS, "the kill came halfway"
    assert not (sweeps / f"{folder.name}.json").exists()  # the driver never wrote its manifest
    return folder


def resumed_equals_uninterrupted(args: list[str], timeout_s: float = BOUND_S) -> tuple[Path, dict[str, Any]]:
    """Run the sweep ``args`` (``cmx`` arguments) whole, then again with its driver killed
    halfway, and resume that one: every point of the resumed sweep equals the uninterrupted
    one's (inputs, status, exit code, outputs) and each is recorded exactly once. The killed
    sweep's folder and the resumed manifest; ``timeout_s`` bounds each whole sweep."""
    whole = subprocess.run(_cmx(*args), capture_output=True, timeout=timeout_s, check=False)
    assert whole.returncode == 0, whole.stderr.decode()
    expected = point_results(json.loads(whole.stdout))
    folder = kill_halfway(_cmx(*args, "--pause=0.5"))
    resumed = subprocess.run(_cmx("sweep", "--resume", folder.name, "--json"), capture_output=True,
                             timeout=timeout_s, check=False)
    assert resumed.returncode == 0, resumed.stderr.decode()
    manifest = json.loads(resumed.stdout)
    got = point_results(manifest)
    assert sorted(got) == sorted(expected) == list(range(POINTS))
    for index in range(POINTS):  # point by point: the same inputs, status and outputs
        assert got[index] == expected[index], index
    assert successes(folder) == dict.fromkeys(range(POINTS), 1)  # each point recorded exactly once
    return folder, manifest


def test_a_sweep_killed_halfway_then_resumed_equals_an_uninterrupted_one(
        cmx_home: Path, recipes: Callable[[str, str], Path]) -> None:
    directory = recipes("square.yaml", SQUARE).parent
    folder, manifest = resumed_equals_uninterrupted(_sweep_args(directory))
    assert manifest["sweep_id"] == folder.name
    got = point_results(manifest)
    for index in range(POINTS):
        assert got[index][3]["square"] == str((index + 1) ** 2)
    again = subprocess.run(_cmx("sweep", "--resume", folder.name, "--json"), capture_output=True,
                           timeout=BOUND_S, check=False)
    assert again.returncode == 0 and point_results(json.loads(again.stdout)) == got  # nothing left to run
    assert successes(folder) == dict.fromkeys(range(POINTS), 1)


def test_resume_runs_only_the_points_without_a_successful_result(
        cli: Callable[..., Any], recipes: Callable[[str, str], Path], tmp_path: Path) -> None:
    directory = recipes("square.yaml", SQUARE).parent
    flag = tmp_path / "go"
    first = cli(*_sweep_args(directory, f"--flag={flag}"))
    manifest = json.loads(first.out)
    assert first.code == POINTS == manifest["failed"]  # the flag is missing: every point fails
    flag.touch()
    folder = paths.data_dir() / "sweeps" / manifest["sweep_id"]
    done = PointOutcome(0, {"n": "1"}, "completed", 0, run_id=None, message="kept")
    record_point(folder, done)  # point 0 counts as done: it is not run again
    resumed = cli("sweep", "--resume", manifest["sweep_id"], "--json")
    assert resumed.code == 0, resumed.err
    points = json.loads(resumed.out)["points"]
    assert points[0]["message"] == "kept" and not (folder / "point-0-r1").exists()
    assert [p["status"] for p in points[1:]] == ["completed"] * (POINTS - 1)
    assert all((folder / f"point-{i}-r1" / "result.json").is_file() for i in range(1, POINTS))
    assert json.loads((folder / "point-3-r1" / "result.json").read_text())["outputs"]["square"] == "16"


def test_a_successful_record_is_never_replaced(cmx_home: Path, tmp_path: Path) -> None:
    first = PointOutcome(2, {"n": "3"}, "completed", 0, run_id="a")
    assert record_point(tmp_path, first) == first
    assert record_point(tmp_path, PointOutcome(2, {"n": "3"}, "completed", 0, run_id="b")) == first
    failed = PointOutcome(4, {"n": "5"}, "error", 1, run_id="c")
    assert record_point(tmp_path, failed) == failed
    better = PointOutcome(4, {"n": "5"}, "completed", 0, run_id="d")
    assert record_point(tmp_path, better) == better  # a failed record is replaced by a success


def test_resume_refuses_what_it_cannot_change_and_unknown_sweeps(cli: Callable[..., Any]) -> None:
    unknown = cli("sweep", "--resume", "sw-20260101-000000-deadbeef")
    assert unknown.code == 2 and "no such sweep to resume" in unknown.err_lines[-1]
    assert "not a sweep id" in cli("sweep", "--resume", "../x").err
    changed = cli("sweep", "--resume", "sw-20260101-000000-deadbeef", "--matrix", "n=1,2")
    assert changed.code == 2 and "--matrix cannot be changed" in changed.err
    moved = cli("sweep", "--resume", "sw-20260101-000000-deadbeef", "--executor", "local", "-j", "4")
    assert moved.code == 2 and "--executor, -j cannot be changed" in moved.err
    assert "give --tags" in cli("sweep", "--matrix", "n=1").err


def test_a_sweep_that_is_running_cannot_be_resumed_at_once(cli: Callable[..., Any], cmx_home: Path) -> None:
    spec = SweepSpec("sw-20260101-000000-0badc0de", "demo,sort", {}, ({"size": "3"},))
    folder = paths.data_dir() / "sweeps" / spec.sweep_id
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps(spec.to_json()))
    with FileLock(str(folder / ".lock")):  # another driver holds it
        busy = subprocess.run(_cmx("sweep", "--resume", spec.sweep_id), capture_output=True, text=True,
                              timeout=BOUND_S, check=False)
    assert busy.returncode == 2 and "is running in another cmx process" in busy.stderr
    assert not list(folder.glob("point-*"))
