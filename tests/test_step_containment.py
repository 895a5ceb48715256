"""Steps contained by the kernel, not by environment tokens (issue #49, item 5): a step that
starts ``setsid env -i sleep`` (a grandchild that left its process group and dropped the
``CMX_RUN_TOKEN`` mark) leaves nothing running when the step ends, when cmx is killed with
SIGKILL, or when cmx and its watchdog both are (the next cmx start kills it); 100 kills at
random moments leave no survivor and no unrecorded run directory. Where no cgroup can be
made (not root, no delegated v2 subtree), the ``cmx`` command kills what it adopted as a
child subreaper when it ends. Every wait is bounded; nothing asserts a time."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.sandbox.step_group import open_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process semantics")

SLEEP = f"{300 + random.random() * 100:.6f}"
"""This test run's own sleep length: how its grandchildren are found in /proc, and no one else's."""

RECIPE = """name: escaper
tags: [escaper]
summary: starts a grandchild in a new session with an empty environment
steps:
  - uses: shell
    with:
      cmd: [sh, -c, 'setsid env -i /bin/sh -c "echo \\$\\$ > $0/gc.tmp; mv $0/gc.tmp $0/gc.pid; exec /bin/sleep $1" &
              while [ ! -s "$0/gc.pid" ]; do sleep 0.01; done; {tail}', "{{{{ inputs.where }}}}", "{sleep}"]
inputs:
  where: {{type: string, default: ""}}
"""
ENDS = "true"
WAITS = "sleep 300"


def _cgroups() -> bool:
    group = open_group()
    if group is None:
        return False
    group.close()
    return True


needs_cgroup = pytest.mark.skipif(not _cgroups(), reason="needs a cgroup of its own for a step (root, or a "
                                                         "delegated cgroup v2 subtree): the kernel's containment")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _ours() -> list[int]:
    """Every live process running this test's sleep."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if SLEEP.encode() in argv and _alive(int(name)):
            found.append(int(name))
    return found


def _wait_for(predicate: Callable[[], bool], what: str, bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {bound:g} s: {what}")
        time.sleep(0.02)


@pytest.fixture
def escaper(tmp_path: Path) -> Iterator[Callable[[str], tuple[list[str], Path]]]:
    """``escaper(tail)``: the ``cmx run`` argv of the recipe (the step then runs ``tail``) and
    the folder its grandchild writes its PID to."""

    def make(tail: str) -> tuple[list[str], Path]:
        recipes, where = tmp_path / "recipes", tmp_path / "pids"
        recipes.mkdir(exist_ok=True)
        where.mkdir(exist_ok=True)
        (recipes / "escaper.yaml").write_text(RECIPE.format(tail=tail, sleep=SLEEP))
        return [sys.executable, "-m", "cmx_core", "run", "recipe", "--recipes", str(recipes), "--tags=escaper",
                f"--where={where}"], where

    yield make
    for pid in _ours():  # a failed assertion leaves nothing behind
        os.kill(pid, signal.SIGKILL)


def _grandchild(where: Path, proc: subprocess.Popen[bytes] | None = None) -> int:
    _wait_for(lambda: (where / "gc.pid").is_file() or (proc is not None and proc.poll() is not None),
              "the step started its grandchild")
    return int((where / "gc.pid").read_text())


def test_the_grandchild_is_gone_when_the_cmx_command_ends(escaper: Callable[..., Any], cmx_home: Path) -> None:
    """As root its cgroup is killed at the step's end; as another user the command kills what
    it adopted as a subreaper when it ends. Either way nothing the step started runs on."""
    argv, where = escaper(ENDS)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    pid = _grandchild(where)
    _wait_for(lambda: not _alive(pid), "the setsid env -i grandchild died with the run", bound=10)


@needs_cgroup
def test_the_grandchild_is_killed_at_the_end_of_its_step(escaper: Callable[..., Any], cmx_home: Path) -> None:
    """In-process (no command end, no subreaper sweep): only the step's cgroup can do it."""
    from cmx_core import api

    argv, where = escaper(ENDS)
    result = api.run("escaper", {"where": str(where)}, recipes_dirs=[argv[6]])
    assert result.status == "completed", result
    assert not _alive(_grandchild(where))


def _waiting_run(escaper: Callable[..., Any]) -> tuple[subprocess.Popen[bytes], int]:
    """A ``cmx run`` whose step waits, and its grandchild's PID once it runs."""
    argv, where = escaper(WAITS)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = _grandchild(where, proc)
    assert _alive(pid) and proc.poll() is None
    return proc, pid


@needs_cgroup
def test_sigkill_of_cmx_kills_the_grandchild_through_its_cgroup(escaper: Callable[..., Any],
                                                                cmx_home: Path) -> None:
    proc, pid = _waiting_run(escaper)
    proc.kill()
    proc.wait(timeout=60)
    _wait_for(lambda: not _alive(pid), "the watchdog emptied the step's cgroup")


@needs_cgroup
def test_with_the_watchdog_killed_too_the_next_cmx_start_kills_it(escaper: Callable[..., Any],
                                                                  cmx_home: Path) -> None:
    proc, pid = _waiting_run(escaper)
    watchdogs = [int(n) for n in os.listdir("/proc") if n.isdigit() and _child_watchdog(int(n), proc.pid)]
    assert len(watchdogs) == 1
    os.kill(watchdogs[0], signal.SIGKILL)
    _wait_for(lambda: not _alive(watchdogs[0]), "the watchdog died")
    proc.kill()
    proc.wait(timeout=60)
    # nothing of that cmx is left to kill it: a later cmx start must (this one, or any other
    # on the machine that starts first: each empties the step groups of dead cmx processes)
    later = subprocess.run([sys.executable, "-m", "cmx_core", "results", "list", "--json"], capture_output=True,
                           text=True, timeout=120, check=False)
    assert later.returncode == 0, later.stderr
    _wait_for(lambda: not _alive(pid), "the next cmx start killed what the dead cmx's step group held")


def _child_watchdog(pid: int, parent: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return int(stat[1]) == parent and b"-S" in argv and any(b"def watch" in a for a in argv)


KILLS = 100


@needs_cgroup
def test_a_hundred_kills_at_random_moments_leave_no_survivor_and_no_unrecorded_run(
        escaper: Callable[..., Any], cmx_home: Path) -> None:
    """The issue's must-show: ``kill -9`` of cmx at a random moment (from its start to a while
    into the step), 100 times; then no grandchild runs and every run directory is recorded."""
    argv, where = escaper(WAITS)
    chance = random.Random(49)
    for _ in range(KILLS):
        (where / "gc.pid").unlink(missing_ok=True)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if chance.random() < 0.5:  # at a random moment of the start-up
            time.sleep(chance.uniform(0.0, 0.8))
        else:  # at a random moment after the grandchild started
            _wait_for(lambda p=proc: (where / "gc.pid").is_file() or p.poll() is not None, "the step started")
            time.sleep(chance.uniform(0.0, 0.2))
        proc.kill()
        proc.wait(timeout=60)
    _wait_for(lambda: not _ours(), f"no grandchild of the {KILLS} killed runs is left")
    reindex = subprocess.run([sys.executable, "-m", "cmx_core", "results", "reindex"], capture_output=True,
                             text=True, timeout=300, check=False)
    assert reindex.returncode == 0, reindex.stderr
    listed = subprocess.run([sys.executable, "-m", "cmx_core", "results", "list", "--json", "--limit=0"],
                            capture_output=True, text=True, timeout=300, check=True)
    recorded = {str(run["run_id"]) for run in json.loads(listed.stdout)["runs"]}
    left = sorted(paths.runs_dir().iterdir()) if paths.runs_dir().is_dir() else []
    assert left, "no kill landed after a run directory was made"
    for run_dir in left:
        document = json.loads((run_dir / "result.json").read_text())
        assert document["run_id"] in recorded, run_dir


@needs_cgroup
def test_a_sweep_tells_a_live_makers_group_from_a_dead_one_with_the_same_pid() -> None:
    """PIDs wrap (32768 here): a group left by an earlier process with this process's PID is
    the dead one's, and goes; this process's own group stays. The sweep that went by the PID
    alone removed a live run's new group under its step (a CI run's sweep point failed with
    '.../cmx-sandbox-1580-0: No such file or directory')."""
    from cmx_core.sandbox.cgroups import remove_group_dir, start_ticks
    from cmx_core.sandbox.step_group import sweep_dead

    group = open_group()
    assert group is not None
    parent, me = group.path.parent, os.getpid()
    assert group.path.name.startswith(f"cmx-sandbox-{me}-{start_ticks(me)}-")
    earlier = parent / f"cmx-sandbox-{me}-{(start_ticks(me) or 1) - 1}-0"  # the same PID, started before
    older_cmx = parent / f"cmx-sandbox-{me}-999999"  # an older cmx's name: the PID alone says
    for made in (earlier, older_cmx):
        made.mkdir()
    try:
        sweep_dead(parent)
        assert group.path.is_dir() and older_cmx.is_dir()
        assert not earlier.exists()
    finally:
        for made in (earlier, older_cmx):
            if made.exists():
                remove_group_dir(made)
        group.close()
