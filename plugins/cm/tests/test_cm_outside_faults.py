"""A bridged script stopped from outside cmx: ``kill`` of the cmx process by PID (SIGTERM, as a
CI cancel sends, and SIGKILL) and a step's time limit. Nothing the script started may stay
running: its shell, what it put in the background and what that is running.

The script's run.sh records its shell's and each background process's PID in a file the test
reads; the test waits for it (with a deadline, never a sleep sized to the machine) before it
kills cmx, and afterwards finds each recorded process gone (or a zombie of no one's)."""

from __future__ import annotations

import json
import os
import shutil
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

from cmx_cm.publish import publish

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


def _many_scripts(root: Path, count: int) -> None:
    for number in range(count):
        write_script(root, f"many-{number:03d}", f"alias: many-{number:03d}\nuid: {number:016x}\n"
                                                 f"automation_alias: script\ntags: [many, n{number}]\n")


def _recipe_files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir()) if p.is_file()} if directory.is_dir() else {}


def _stopped_while_writing(collection: Path, out: Path) -> subprocess.Popen[str] | None:
    """``cmx import cm`` frozen (SIGSTOP) while it writes its recipes aside, or None when it
    got past that before the stop reached it (the caller tries again)."""
    cmx = subprocess.Popen([*CMX, "import", "cm", str(collection), "--out", str(out)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + DEADLINE_S
    while not list(out.glob(".importing-*/*.yaml")) and cmx.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(cmx.pid, signal.SIGSTOP)
    if cmx.poll() is None and list(out.glob(".importing-*")):
        return cmx
    os.kill(cmx.pid, signal.SIGCONT)
    cmx.communicate(timeout=DEADLINE_S)
    return None


@pytest.mark.parametrize("earlier", [False, True], ids=["first-import", "over-an-earlier-import"])
def test_an_import_killed_part_way_changes_nothing(earlier: bool, tmp_path: Path,
                                                   cmx_cli: Callable[..., Any]) -> None:
    """``kill PID`` of ``cmx import cm`` while it writes: the recipe folder stays as the last
    whole import left it (empty, or that import's files unchanged), and nothing is left
    aside. Before, it kept the part written (24 of 306 recipes, 270, ...), and a later
    ``cmx cm run script`` chose among that part."""
    collection = tmp_path / "collection" / "script"
    _many_scripts(collection, 300)
    out = tmp_path / "recipes"
    if earlier:
        write_script(collection, "only-earlier", "alias: only-earlier\nuid: eeeeeeeeeeeeeeee\n"
                                                 "automation_alias: script\ntags: [earlier]\n")
        assert cmx_cli("import", "cm", str(collection), "--out", str(out)).returncode == 0
        shutil.copytree(out, tmp_path / "earlier")
        (collection / "only-earlier" / "_cm.yaml").unlink()
        (collection / "many-000" / "_cm.yaml").write_text("alias: many-000\nuid: 0000000000000000\n"
                                                           "automation_alias: script\ntags: [many, changed]\n")
    before = _recipe_files(out)
    for _ in range(5):
        cmx = _stopped_while_writing(collection, out)
        if cmx is not None:
            break
        shutil.rmtree(out)  # it finished first: start again from the same folder
        if earlier:
            shutil.copytree(tmp_path / "earlier", out)
    assert cmx is not None, "the import finished before it could be stopped, five times"
    os.kill(cmx.pid, signal.SIGTERM)
    os.kill(cmx.pid, signal.SIGCONT)
    _, err = cmx.communicate(timeout=DEADLINE_S)
    assert cmx.returncode == 130, err
    assert _recipe_files(out) == before
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    done = cmx_cli("import", "cm", str(collection), "--out", str(out))  # and the next import completes it
    assert done.returncode == 0, done.stderr
    names = set(_recipe_files(out))
    assert len([n for n in names if n.startswith("cm.many-")]) == 300 and "cm.only-earlier.yaml" not in names


def test_a_stop_during_the_renames_is_acted_on_once_all_are_moved(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The last step of an import, moving its files in, is not parted by a SIGTERM that comes
    in the middle (here: sent by the first rename): the signal acts once every file is in."""
    staging, out = tmp_path / "staging", tmp_path / "out"
    staging.mkdir()
    out.mkdir()
    for name in ("a.yaml", "b.yaml", "stamps.json"):
        (staging / name).write_text(name)
    (out / "gone.yaml").write_text("earlier")
    real_replace = os.replace
    seen: list[str] = []

    def replace(source: Any, target: Any) -> None:
        if not seen:
            signal.raise_signal(signal.SIGTERM)
        seen.append(Path(target).name)
        real_replace(source, target)

    def stop(number: int, frame: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(KeyboardInterrupt):
            publish(staging, out, last=("stamps.json",), remove=["gone.yaml"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == ["a.yaml", "b.yaml", "stamps.json"]
    assert sorted(p.name for p in out.iterdir()) == ["a.yaml", "b.yaml", "stamps.json"]
    assert signal.getsignal(signal.SIGTERM) is previous
