"""The run's process tree followed from round to round (issue #46): the known processes and
the children the kernel lists for them, never every process on the machine. A grandchild
started between rounds is found; a process beside the run is not; those that ended keep
their CPU time in the tree's counter. Every process started here is stopped by its PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from cmx_core.telemetry.probes import ProcessTree

CHILD = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(grandchild.pid, flush=True)
time.sleep(120)
"""


def _stop(pid: int) -> None:
    """Kill ``pid`` if it is still the process this test started (psutil checks its start time)."""
    proc = STARTED.get(pid)
    if proc is None:
        return
    try:
        proc.send_signal(signal.SIGKILL)
    except psutil.NoSuchProcess:
        pass


STARTED: dict[int, psutil.Process] = {}


@pytest.fixture
def family() -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """A child with a grandchild under this process, and beside it this process's parent (an
    orphan started from here would come back to this process where it is a child subreaper,
    as cmx makes itself)."""
    beside = os.getppid()
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    for pid in (child.pid, grandchild):
        STARTED[pid] = psutil.Process(pid)
    try:
        yield child, grandchild, beside
    finally:
        for pid in (grandchild, child.pid):
            _stop(pid)
        child.wait(timeout=60)


def _pids(tree: ProcessTree) -> set[int]:
    return {p.pid for p in tree._members()}


def test_the_tree_finds_new_descendants_and_nothing_beside_the_run(
        family: tuple[subprocess.Popen[str], int, int]) -> None:
    child, grandchild, beside = family
    tree = ProcessTree(os.getpid())
    assert tree.problems == []  # this kernel lists children: no scan of the machine
    members = _pids(tree)
    assert {os.getpid(), child.pid, grandchild} <= members and not {beside, 1} & members
    first = dict(zip(("cpu", "processes"), (next(v for n, _, v in tree.read() if n == name)
                                            for name in ("cmx_process_cpu_seconds", "cmx_process_processes")),
                     strict=True))
    assert first["processes"] >= 3
    _stop(grandchild)
    _stop(child.pid)
    child.wait(timeout=60)  # reaped here; the grandchild goes to init, or to this process where
    deadline = time.monotonic() + 60  # it is a child subreaper: then it is reaped here too
    while grandchild in _pids(tree) and time.monotonic() < deadline:
        try:
            os.waitpid(grandchild, os.WNOHANG)
        except ChildProcessError:
            pass  # not this process's child: init reaps it
        time.sleep(0.05)
    points = {n: v for n, _, v in tree.read()}
    assert not {child.pid, grandchild} & _pids(tree)
    assert points["cmx_process_processes"] < first["processes"]
    assert points["cmx_process_cpu_seconds"] >= first["cpu"]  # what they used stays counted
