"""A failed step's cause comes from its own evidence (docs/faults.md, issue 44 item 4): a kill
from outside cmx, by PID, is typed ``killed`` (SIGKILL) or ``terminated`` (SIGTERM) with the
signal's name, and another process's OOM kill elsewhere on the machine (in a cgroup this test
makes) does not type a step that was not OOM-killed ``oom``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cmx_core.results.validate import validate_document
from cmx_core.sandbox.bubblewrap import make_groups
from cmx_core.sandbox.cgroups import RunGroups
from cmx_core.testing import processes_with

SLEEPER = """
name: sleeper
tags: [sleeper]
summary: a step that sleeps until something from outside ends it
cache: false
inputs:
  n: {type: integer, default: 0}
steps:
  - uses: shell
    with: {cmd: [sleep, "{{ 4713000 + inputs.n }}"]}
"""

HOG = "b = bytearray(512 << 20)"  # 512 MiB, every page written; the other group allows 32 MiB


def _wait_for(condition: Callable[[], bool], timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@contextmanager
def _sleeping_step(recipes: Any, n: int, cmx_home: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``cmx run`` (its own process) of a step that sleeps, and the PID of the step's ``sleep``."""
    recipes("sleeper", SLEEPER)
    marker = f"sleep {4713000 + n}"
    proc = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=sleeper", "--recipes",
                             str(recipes.dir), f"--n={n}", "--json", "--no-telemetry"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())  # CMX_HOME: cmx_home
    try:
        assert _wait_for(lambda: bool(processes_with(marker, at_start=True))), "the step never started"
        [pid] = processes_with(marker, at_start=True)
        yield proc, pid
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def _error(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    document = json.loads(Path(json.loads(out)["result_path"]).read_text())
    validate_document(document)
    error: dict[str, Any] = document["error"]
    return error


@pytest.mark.parametrize(("sig", "cause"), [(signal.SIGKILL, "killed"), (signal.SIGTERM, "terminated")],
                         ids=["kill-9", "kill-15"])
def test_a_kill_from_outside_is_typed_with_its_signal(recipes: Any, cmx_home: Path, sig: signal.Signals,
                                                      cause: str) -> None:
    with _sleeping_step(recipes, int(sig), cmx_home) as (proc, pid):
        os.kill(pid, sig)
        error = _error(proc)
    assert f"exited with code -{int(sig)}" in error["message"]
    assert error["cause"] == cause and error["signal"] == sig.name, error
    assert error["evidence"] == [f"killed by signal {int(sig)} ({sig.name}): {error['message'][:200]}"]
    assert "rank" not in error


def _need_root_cgroup() -> None:
    """Skip where this test cannot make a memory cgroup of its own; in CI that is a failure."""
    groups = make_groups(("memory",))
    try:
        if groups.set_memory(32 << 20):
            return
    finally:
        groups.remove()
    why = "making another process's memory cgroup needs root (or a delegated cgroup-v2 subtree)"
    if os.environ.get("CI"):
        pytest.fail(f"required in CI: {why}")
    pytest.skip(why)


def _oom_elsewhere() -> int:
    """A process that is not cmx's, in a 32 MiB memory cgroup this test makes, that the kernel
    OOM-kills; the kills its group counted."""
    groups = make_groups(("memory",))
    try:
        assert groups.set_memory(32 << 20)
        procs = groups.dirs["memory"] if isinstance(groups, RunGroups) else groups.dir
        assert procs is not None
        join = 'echo $$ > "$0" && exec "$@"'  # into the group before it allocates
        hog = subprocess.run(["/bin/sh", "-c", join, str(procs / "cgroup.procs"), sys.executable, "-c", HOG],
                             check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        assert hog.returncode == -signal.SIGKILL, hog.stderr
        kills: int = groups.oom_kills()
        return kills
    finally:
        groups.remove()


def test_an_oom_kill_elsewhere_does_not_type_a_step_oom(recipes: Any, cmx_home: Path) -> None:
    _need_root_cgroup()
    with _sleeping_step(recipes, 99, cmx_home) as (proc, pid):
        assert _oom_elsewhere() == 1  # the kernel's machine-wide oom_kill rose while the step ran
        os.kill(pid, signal.SIGKILL)  # and then the step died of SIGKILL, not of memory
        error = _error(proc)
    assert error["cause"] == "killed" and error["signal"] == "SIGKILL", error


def _memory_cgroup(pid: int) -> Path | None:
    """The directory of ``pid``'s memory cgroup (v1's ``memory`` line; None elsewhere)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if "memory" in names.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    return None


def test_the_group_of_a_step_whose_cmx_was_killed_goes_with_the_next_run(recipes: Any, cmx_home: Path) -> None:
    _need_root_cgroup()
    with _sleeping_step(recipes, 7, cmx_home) as (proc, pid):
        group = _memory_cgroup(pid)
        if group is None or not group.name.startswith("cmx-sandbox-"):
            pytest.skip("no cgroup-v1 memory controller here: the step's group is a v2 one")
        proc.kill()  # SIGKILL: cmx cannot remove the step's group; its watchdog kills the step
        assert _wait_for(lambda: not processes_with(f"sleep {4713000 + 7}", at_start=True)), "the step outlived cmx"
    assert group.is_dir()
    recipes("quick", "name: quick\ntags: [quick]\nsummary: one short step\ncache: false\n"
                     "steps:\n  - uses: shell\n    with: {cmd: ['true']}\n")
    done = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=quick", "--recipes",
                           str(recipes.dir), "--no-telemetry"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert not group.exists()  # the next run's first step group swept it
