"""``cmx sweep --search`` (#51) on a recipe whose step prints a known throughput and memory
for ``batch`` and ``algo`` (so no result depends on the machine's speed): the best point meets
the constraints, a search where none can says so, and a search killed with SIGKILL resumes
the same study without measuring a point twice."""

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

RECIPE = """
name: planted-search
tags: [planted, search]
summary: throughput 1000 b / (1 + (b/64)^2), 1.5 times for algo=fast; memory 10 b MB
inputs:
  batch: {type: integer, default: 1}
  algo: {type: string, default: slow}
  gate: {type: string, default: ""}
cache: false
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["sh", "-c", "{{ GATE }}{AWK}"]
      metrics:
        items_per_second: {kv: RATE, unit: items/s, higher_is_better: true}
        memory_mb: {kv: MEM, unit: MB, higher_is_better: false}
"""
AWK = ("awk -v b={{ inputs.batch }} -v a={{ inputs.algo }} 'BEGIN { t = 1000 * b / (1 + (b / 64) ^ 2) * "
       "(a == \\\"fast\\\" ? 1.5 : 1); printf \\\"RATE=%.4f\\\\nMEM=%d\\\\n\\\", t, b * 10 }'")
GATE = ('if [ -n \\"{{ inputs.gate }}\\" ]; then mkdir -p {{ inputs.gate }}/runs; '
        'n=$(ls {{ inputs.gate }}/runs | wc -l); '
        'touch {{ inputs.gate }}/runs/$n; if [ $n -eq 2 ]; then touch {{ inputs.gate }}/waiting; i=0; '
        'while [ ! -e {{ inputs.gate }}/release ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i+1)); done; fi; fi; ')
"""The third run of a gated search waits for a release file (at most 10 minutes), so the
test kills the driver while a point runs: by an event, not by timing."""
MATRIX = ("--matrix", "batch=1..512*2", "--matrix", "algo=fast,slow,medium")


def truth(batch: int, algo: str) -> float:
    return 1000 * batch / (1 + (batch / 64) ** 2) * (1.5 if algo == "fast" else 1)


@pytest.fixture
def recipe_dir(recipes: Any) -> Path:
    path: Path = recipes("planted-search", RECIPE.replace("{{ GATE }}", GATE).replace("{AWK}", AWK))
    return path.parent


def _search(cli: Callable[..., Any], recipe_dir: Path, *extra: str) -> dict[str, Any]:
    done = cli("sweep", "--tags=planted,search", "--recipes", recipe_dir, *MATRIX, "-q", "--json", *extra)
    assert done.code == 0, done.err
    document: dict[str, Any] = json.loads(done.out)
    return document


def test_a_constrained_search_returns_a_best_point_that_meets_the_constraint(cli: Callable[..., Any],
                                                                             recipe_dir: Path) -> None:
    document = _search(cli, recipe_dir, "--search", "max:items_per_second", "--constraint", "memory_mb<=700",
                       "--budget", "12")
    search = document["search"]
    assert search["measured"] == 12 == len(document["points"]) and search["grid_points"] == 30
    best = search["best"]
    batch, algo = int(best["point"]["batch"]), best["point"]["algo"]
    assert batch * 10 <= 700 and best["value"] == pytest.approx(truth(batch, algo), rel=1e-6)
    measured = [truth(int(p["point"]["batch"]), p["point"]["algo"]) for p in document["points"]
                if int(p["point"]["batch"]) * 10 <= 700]
    assert best["value"] == pytest.approx(max(measured), rel=1e-6)  # the best feasible point it measured
    trajectory = [v for v in search["trajectory"] if v is not None]
    assert trajectory == sorted(trajectory) and trajectory[-1] == best["value"]  # best so far never falls
    for index in search["infeasible"]:
        point = next(p for p in document["points"] if p["index"] == index)["point"]
        assert int(point["batch"]) * 10 > 700  # recorded, never the best
    assert len({p["index"] for p in document["points"]}) == 12  # no point twice
    shown = cli("results", "compare", "--sweep", document["sweep_id"])
    assert shown.code == 0 and "(12 points)" in shown.out


def test_a_search_where_no_point_meets_the_constraint_says_so(cli: Callable[..., Any], recipe_dir: Path) -> None:
    document = _search(cli, recipe_dir, "--search", "max:items_per_second", "--constraint", "memory_mb<=1",
                       "--budget", "4")
    assert document["search"]["best"] is None and len(document["search"]["infeasible"]) == 4
    text = cli("sweep", "--tags=planted,search", "--recipes", recipe_dir, "--matrix", "batch=1,2", "-q",
               "--search", "max:items_per_second", "--constraint", "memory_mb<=1", "--budget", "2")
    assert text.code == 0 and "no measured point met the constraints (2 broke one)" in " ".join(text.out.split())


def test_bad_search_options_are_one_line_errors(cli: Callable[..., Any], recipe_dir: Path) -> None:
    cases = {("--search", "biggest:x"): "expected max:METRIC or min:METRIC",
             ("--search", "max:x", "--constraint", "x<y"): "expected METRIC<=NUMBER or METRIC>=NUMBER",
             ("--search", "max:x", "--budget", "soon"): "expected a number of runs",
             ("--search", "max:x", "-j", "2"): "runs one point at a time",
             ("--search", "max:x", "--confirm", "-1"): "give 0 to 50 runs more",
             ("--search", "max:mlperf.qps", "--prune"): "a live series is named with letters",
             ("--budget", "3"): "go with --search", ("--prune",): "go with --search"}
    for args, message in cases.items():
        done = cli("sweep", "--tags=planted,search", "--recipes", recipe_dir, *MATRIX, *args)
        assert done.code == 2 and message in done.err and len(done.err_lines) == 1, (args, done.err)
    bad_range = cli("sweep", "--tags=planted,search", "--recipes", recipe_dir, "--matrix", "batch=8..1")
    assert bad_range.code == 2 and "expected LO..HI with LO <= HI" in bad_range.err


def test_a_search_killed_with_sigkill_resumes_the_same_study_and_measures_no_point_twice(
        cmx_home: Path, recipe_dir: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    env = {**os.environ, "CMX_HOME": str(cmx_home)}
    argv = [sys.executable, "-m", "cmx_core", "sweep", "--tags=planted,search", "--recipes", str(recipe_dir),
            *MATRIX, "--search", "max:items_per_second", "--budget", "6", "--confirm", "0", f"--gate={gate}",
            "--json", "-q"]
    driver = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not (gate / "waiting").exists():  # the third point is running and holds
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[1][-2000:]
        time.sleep(0.05)
    os.kill(driver.pid, signal.SIGKILL)  # from outside cmx, by PID
    driver.wait(timeout=60)
    (gate / "release").touch()
    sweeps = cmx_home / "data" / "sweeps"
    sweep_id = next(p.name for p in sweeps.iterdir() if p.is_dir())
    before = _study_trials(sweeps / sweep_id)
    resumed = subprocess.run([sys.executable, "-m", "cmx_core", "sweep", "--resume", sweep_id, "--json", "-q"],
                             env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    document = json.loads(resumed.stdout)
    assert document["sweep_id"] == sweep_id and document["search"]["measured"] == 6
    after = _study_trials(sweeps / sweep_id)
    assert after[: len(before)] == before and len(after) > len(before)  # the same study, continued
    valid: dict[int, int] = {}
    for result in (sweeps / sweep_id).glob("point-*/result.json"):
        doc = json.loads(result.read_text())
        if doc["status"] == "valid":
            index = doc["provenance"]["sweep"]["index"]
            valid[index] = valid.get(index, 0) + 1
    assert sorted(valid.values()) == [1] * 6, valid  # six points, each measured once


def _study_trials(folder: Path) -> list[int]:
    import sqlite3

    with sqlite3.connect(folder / "study.db") as db:
        return [row[0] for row in db.execute("SELECT number FROM trials ORDER BY number")]


def test_the_gaussian_process_sampler_searches_the_same_space(cli: Callable[..., Any], recipe_dir: Path) -> None:
    document = _search(cli, recipe_dir, "--search", "max:items_per_second", "--sampler", "gp", "--budget", "6",
                       "--confirm", "0")
    search = document["search"]
    assert search["sampler"] == "gp" and search["measured"] == 6
    best = search["best"]
    assert best["value"] == pytest.approx(max(truth(int(p["point"]["batch"]), p["point"]["algo"])
                                              for p in document["points"]), rel=1e-6)
    refused = cli("sweep", "--tags=planted,search", "--recipes", recipe_dir, *MATRIX, "--sampler", "gp")
    assert refused.code == 2 and "go with --search" in refused.err
