"""The run's process tree followed from round to round (issue #46): the known processes and
the children the kernel lists for them, never every process on the machine. A grandchild
started between rounds is found; a process beside the run is not; those that ended keep
their CPU time in the tree's counter. Every process started here is stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

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


class _Ended(ProcessTree):
    """A tree whose members are given: processes that report fixed CPU times, then end."""

    def __init__(self, members: list[psutil.Process]) -> None:
        super().__init__()
        self.given = members
        self._io = False

    def _members(self) -> list[psutil.Process]:
        return self.given


class _Fixed:
    """What ``read`` asks of a process, at fixed values (1.38, 0.87 and 0.06 s of CPU sum to
    2.31 in one order and to 2.3099999999999996 in another)."""

    def __init__(self, pid: int, cpu_s: float) -> None:
        self.pid, self.cpu_s = pid, cpu_s

    def oneshot(self) -> Any:
        return contextlib.nullcontext()

    def cpu_times(self) -> Any:
        return types.SimpleNamespace(user=self.cpu_s, system=0.0)

    def memory_info(self) -> Any:
        return types.SimpleNamespace(rss=1 << 20)

    def num_threads(self) -> int:
        return 1


def test_the_cpu_counter_never_goes_down_by_a_rounding_error() -> None:
    """The CPU counter is a sum in a new order once a process ends (what ended, then what is
    left): a rounding error lower would read as a counter reset, so it never goes down."""
    procs = [_Fixed(101, 1.38), _Fixed(102, 0.87), _Fixed(103, 0.06)]
    tree = _Ended(procs)  # type: ignore[arg-type]
    cpu = [dict((n, v) for n, _, v in tree.read())["cmx_process_cpu_seconds"]]
    tree.given = procs[1:]  # type: ignore[assignment]  # the first ended: its time is counted as gone
    cpu.append(dict((n, v) for n, _, v in tree.read())["cmx_process_cpu_seconds"])
    assert cpu == [1.38 + 0.87 + 0.06] * 2 and cpu[0] > (0.0 + 1.38) + (0.87 + 0.06)
