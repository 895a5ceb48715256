"""A run never outlives cmx, and a killed run is recorded (#17 item 5): `kill -9` of cmx
mid-step leaves no step process, no staging directory, and a run listed as interrupted."""

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

from cmx_core.testing import processes_with

SLEEPER = """
name: sleeper
tags: [sleeper]
summary: a cached step that sleeps until it is killed
inputs:
  n: {type: integer, default: 0}
steps:
  - uses: shell
    with: {cmd: [sleep, "{{ 4711000 + inputs.n }}"]}
"""

KILLS = 30


def _wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_kill_9_mid_step_leaves_nothing_running_and_every_run_recorded(cli: Callable[..., Any],
                                                                       recipes: Callable[[str, str], Path],
                                                                       cmx_home: Path) -> None:
    recipes("sleeper", SLEEPER)
    directory = str(recipes.dir)  # type: ignore[attr-defined]
    for n in range(KILLS):
        marker = f"sleep {4711000 + n}"  # no other process sleeps this long
        proc = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=sleeper",
                                 "--recipes", directory, f"--n={n}"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
        assert _wait_for(lambda m=marker: bool(processes_with(m, at_start=True))), f"kill {n}: the step never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        gone = _wait_for(lambda m=marker: not processes_with(m, at_start=True), 10.0)
        assert gone, f"kill {n}: the step outlived cmx"
    listed = cli("results", "list", "--status", "error", "--limit", "100", "--json")  # the one cmx command
    assert listed.code == 0, listed.err
    runs = json.loads(listed.out)["runs"]
    assert len(runs) == KILLS and all(r["recipe"] == "sleeper" for r in runs)
    for run in runs:
        document = json.loads(Path(run["result_path"]).read_text())
        assert document["error"]["message"].startswith("interrupted: the cmx process (pid ")
    assert not list((cmx_home / "cache" / "staging").glob("*")) or cli("run", "recipe", "--tags=demo,sort").code == 0
    assert not list((cmx_home / "cache" / "staging").glob("*"))  # a later run cleaned what the kills left
    assert not list((cmx_home / "data" / "inflight").glob("*"))
