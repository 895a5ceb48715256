"""A bridged script stopped from outside cmx: ``kill`` of the cmx process by PID (SIGTERM, as a
CI cancel sends, and SIGKILL) and a step's time limit. Nothing the script started may stay
running: its shell, what it put in the background and what that is running.

The script's run.sh records its shell's and each background process's PID in a file the test
reads; the test waits for it (with a deadline, never a sleep sized to the machine) before it
kills cmx, and afterwards finds each recorded process gone (or a zombie of no one's)."""

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
import yaml
from cm_helpers import kill_all, left_running, write_script

CMX = [sys.executable, "-m", "cmx_core"]
DEADLINE_S = 300.0
"""How long the test waits for a state a healthy run reaches in well under a second."""


def _sleeper(tmp: Path) -> Path:
    """A CM script whose run.sh starts two sleeps, one in the background, and records the
    PIDs of its shell and of both sleeps in ``tmp/pids`` ("started" on the last line)."""
    pids = tmp / "pids"
    write_script(tmp / "collection" / "script", "sleeper", """
        alias: sleeper
        uid: 5eeb5eeb5eeb5eeb
        automation_alias: script
        automation_uid: 5b4e0237da074764
        tags: [sleeper]
        """, run_sh=f"""
        echo $$ >> {pids}
        sleep 1201 &
        echo $! >> {pids}
        sleep 1202 &
        echo $! >> {pids}
        echo started >> {pids}
        wait
        """)
    return pids


def _recipes(cmx_cli: Callable[..., Any], tmp: Path) -> Path:
    out = tmp / "recipes"
    done = cmx_cli("import", "cm", str(tmp / "collection" / "script"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def _recorded(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split() if line.isdigit()] if pids.is_file() else []


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_script_running_when_cmx_is_killed_leaves_nothing_running(how: signal.Signals, tmp_path: Path,
                                                                   cmx_cli: Callable[..., Any]) -> None:
    """Before the script runner ran as a step process (its own group, killed with cmx), a
    SIGTERM of cmx killed the runner alone: the script's shell and both sleeps ran on."""
    pids = _sleeper(tmp_path)
    recipes = _recipes(cmx_cli, tmp_path)
    cmx = subprocess.Popen([*CMX, "cm", "run", "script", "--tags=sleeper", "--recipes", str(recipes)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while "started" not in (pids.read_text() if pids.is_file() else "") and cmx.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cmx.poll() is None, f"cmx ended before the script started: {cmx.stderr.read() if cmx.stderr else ''}"
        assert len(_recorded(pids)) == 3
        os.kill(cmx.pid, how)
        _, err = cmx.communicate(timeout=DEADLINE_S)
        assert cmx.returncode == (130 if how == signal.SIGTERM else -signal.SIGKILL), err
        assert left_running(_recorded(pids)) == []
    finally:
        cmx.kill()
        cmx.wait()
        kill_all(_recorded(pids))


def test_a_script_past_its_time_limit_is_stopped_with_all_it_started(tmp_path: Path,
                                                                     cmx_cli: Callable[..., Any]) -> None:
    """The step's ``timeout_s`` bounds the whole script (customize.py included), and what the
    script left in the background goes with it: before, only the shell was killed."""
    pids = _sleeper(tmp_path)
    recipes = _recipes(cmx_cli, tmp_path)
    recipe_file = recipes / "cm.sleeper.yaml"
    recipe = yaml.safe_load(recipe_file.read_text())
    recipe["steps"][0]["with"]["timeout_s"] = 5
    recipe_file.write_text(yaml.safe_dump(recipe))
    try:
        done = cmx_cli("cm", "run", "script", "--tags=sleeper", "--recipes", str(recipes), timeout=DEADLINE_S)
        assert done.returncode == 1, done.stderr
        assert "cm.sleeper: the script ran past its time limit of 5 s and was stopped" in done.stderr
        assert left_running(_recorded(pids)) == []
    finally:
        kill_all(_recorded(pids))


def test_an_injected_kill_strikes_the_script_and_is_recorded(tmp_path: Path, cmx_cli: Callable[..., Any]) -> None:
    """``--inject kill-step`` reaches a bridged script as it reaches a shell step's command:
    the runner's group is killed, the failure names the signal (not "the script called
    exit?"), the run's record lists the injection, and nothing the script started runs on."""
    pids = _sleeper(tmp_path)
    recipes = _recipes(cmx_cli, tmp_path)
    try:
        done = cmx_cli("run", "recipe", "--tags=cm,sleeper", "--recipes", str(recipes), "--inject", "kill-step@1s",
                       "--json", timeout=DEADLINE_S)
        assert done.returncode == 1, done.stderr
        assert "the script runner was killed by signal 9 (SIGKILL) without a result" in done.stderr
        record = json.loads(Path(json.loads(done.stdout)["result_path"]).read_text())
        assert [(a["step"], a["injected"], a["fault"]) for a in record["attempts"]] == \
            [("step0", "kill-step@1s", "killed")]
        assert record["error"]["signal"] == "SIGKILL"
        assert left_running(_recorded(pids)) == []
    finally:
        kill_all(_recorded(pids))
