"""No orphans (issue 28): SIGKILL of cmx during a shell step that started grandchildren
leaves no process of the run alive, including one that left the step's process group with
``setsid``; and should the watchdog be killed too, the next cmx start kills the leftovers
from the interrupted run's record. Every wait is bounded; nothing asserts a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process semantics")

RECIPE = """name: spawner
tags: [spawner]
summary: starts grandchildren and waits
steps:
  - uses: shell
    with:
      cmd: [sh, -c, '(sleep 302 & echo $! > "$0/orphan.pid.tmp"; mv "$0/orphan.pid.tmp" "$0/orphan.pid");
              sleep 300 & echo $! > "$0/in-group.pid"; setsid sleep 301 & echo $! > "$0/escaped.pid"; wait',
            "{{ inputs.where }}"]
inputs:
  where: {type: string, default: ""}
"""

OK = "name: ok\ntags: [ok]\nsummary: fine\nsteps:\n  - {uses: shell, with: {cmd: [\"true\"]}}\n"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped by its (new) parent


def _wait_for(predicate, what: str, bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {bound:g} s: {what}")
        time.sleep(0.05)


def _start(tmp_path: Path, home: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "spawner.yaml").write_text(RECIPE)
    (recipes / "ok.yaml").write_text(OK)
    where = tmp_path / "pids"
    where.mkdir(exist_ok=True)
    env = {**os.environ, "CMX_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "recipe", "--recipes", str(recipes),
                             "--tags=spawner", f"--where={where}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    files = [where / "in-group.pid", where / "escaped.pid", where / "orphan.pid"]
    _wait_for(lambda: all(f.exists() and f.read_text().strip() for f in files) or proc.poll() is not None,
              "the step started its grandchildren")
    assert proc.poll() is None, "cmx ended before the step started its grandchildren"
    return proc, [int(f.read_text()) for f in files]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_sigkill_of_cmx_leaves_no_process_of_the_run(tmp_path: Path) -> None:
    proc, pids = _start(tmp_path, tmp_path / "home")
    try:
        assert all(_alive(p) for p in pids)
        # the orphan's parent (a subshell) has exited: it was re-parented to cmx, the subreaper
        assert Path(f"/proc/{pids[2]}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(proc.pid)
        proc.kill()  # SIGKILL: cmx can run no code of its own
        proc.wait(timeout=60)
        _wait_for(lambda: not any(_alive(p) for p in pids), "the grandchildren died with cmx")
    finally:
        _cleanup(pids)


def _watchdog_of(pid: int) -> list[int]:
    """The watchdog processes ``pid`` started (its children running ``-S -c``)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[1]) == pid and b"-S" in argv and any(b"def watch" in a for a in argv):
            found.append(int(name))
    return found


def test_the_next_cmx_start_kills_what_an_interrupted_run_left(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, pids = _start(tmp_path, home)
    try:
        watchdogs = _watchdog_of(proc.pid)
        assert len(watchdogs) == 1
        os.kill(watchdogs[0], signal.SIGKILL)  # the watchdog first, then cmx: nobody left to clean up
        _wait_for(lambda: not _alive(watchdogs[0]), "the watchdog died")
        proc.kill()
        proc.wait(timeout=60)
        # the escaped grandchild outlived cmx and its watchdog; any cmx start on the machine
        # (this one, or another test's) now kills it: from the run's record, or as root from
        # the step's cgroup, which a cmx start empties once its maker is gone
        later = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--recipes",
                                str(tmp_path / "recipes"), "--tags=ok"], env={**os.environ, "CMX_HOME": str(home)},
                               capture_output=True, text=True, timeout=120, check=False)
        assert later.returncode == 0, later.stderr
        _wait_for(lambda: not any(_alive(p) for p in pids), "the next cmx start killed the leftovers")
    finally:
        _cleanup(pids)
