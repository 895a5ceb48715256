"""The no-cgroup memory path, piece by piece and for real: the process tree's RSS, the
watchdog's word, the subreaper that lets ``wait4`` see the sandbox's PID 1, and the verdicts
made of them (the whole path runs as a real unprivileged user in test_sandbox_unprivileged.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmx_core.sandbox.spec import Limits
from cmx_core.sandbox.verdict import Ending, Verdict, decide
from cmx_core.sandbox.watchdog import MemoryWatchdog, Usage, _children, subreaper, tree_rss

HOLD = """
import os, sys, time
block = bytearray(40 << 20)
block[::4096] = b"x" * (len(block) // 4096)
if len(sys.argv) > 1:
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, __file__])
print("ready", flush=True)
time.sleep(30)
"""


def test_tree_rss_sums_every_process_under_the_pid(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    proc = subprocess.Popen([sys.executable, str(script), "fork"], stdout=subprocess.PIPE, text=True)
    children: list[int] = []
    try:
        assert proc.stdout is not None
        ready = [proc.stdout.readline() for _ in range(2)]  # the parent's and the child's line
        assert ready == ["ready\n", "ready\n"]
        children = _children(proc.pid)
        total = tree_rss(proc.pid)
        assert total >= 80 << 20, total  # both 40 MiB blocks, not only the parent's
        watch = MemoryWatchdog(proc.pid, 60 << 20)
        assert watch() == "memory" and watch.peak == max(total, watch.peak) >= 80 << 20
        assert MemoryWatchdog(proc.pid, 1 << 30)() is None
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
    assert tree_rss(proc.pid) == 0  # gone: nothing to count


def test_a_subreaper_gets_the_orphan_and_its_rusage() -> None:
    code = ("import os, sys, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    b = bytearray(30 << 20); b[::4096] = b'x' * (len(b) // 4096); time.sleep(0.5); os._exit(0)\n"
            "print(pid, flush=True)\n")  # the parent exits at once, orphaning its child
    with subreaper() as ok:
        assert ok
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        orphan = int(out)
        deadline = time.monotonic() + 10
        while True:  # it is this process's child now: wait4 returns it and its usage
            got, status, usage = os.wait4(orphan, os.WNOHANG)
            if got == orphan or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert got == orphan and os.WIFEXITED(status)
    assert Usage.of(usage).peak_rss_bytes >= 30 << 20


LIMITS = Limits(memory_bytes=256 << 20)


def test_the_watchdogs_stop_is_a_memory_verdict() -> None:
    verdict, code, sig, reason = decide(Ending(stop="memory", status=signal.SIGKILL, watched_peak=300 << 20), LIMITS)
    assert (verdict, code, sig) == (Verdict.MEMORY_LIMIT, None, signal.SIGKILL)
    assert reason == (f"memory limit of {256 << 20} bytes reached: the run's processes held {300 << 20} bytes "
                      "resident; killed")


def test_a_peak_over_the_limit_after_exit_is_a_memory_verdict_as_with_a_cgroup() -> None:
    verdict, code, _, reason = decide(Ending(stop="exited", status=0, watched_peak=(256 << 20) + 1), LIMITS)
    assert verdict is Verdict.MEMORY_LIMIT and code == 0 and "rusage" in reason
    assert decide(Ending(stop="exited", status=0, watched_peak=256 << 20), LIMITS)[0] is Verdict.OK
    assert decide(Ending(stop="exited", status=0, watched_peak=None), LIMITS)[0] is Verdict.OK  # a cgroup's run


def test_a_peak_over_the_limit_comes_before_the_deadline_that_stopped_the_run() -> None:
    """A watchdog tick can come after the deadline's on a loaded machine (seen: an ALE-Bench
    MLE solution judged TLE once in 20); the peak was passed before the run was stopped, when a
    memory cgroup would have killed it, so the verdict is the memory limit's."""
    for stop in ("wall", "cpu", "output"):
        verdict, code, sig, reason = decide(Ending(stop=stop, status=signal.SIGKILL, watched_peak=300 << 20), LIMITS)
        assert (verdict, code, sig) == (Verdict.MEMORY_LIMIT, None, signal.SIGKILL), stop
        assert f"before the {stop} limit stopped it" in reason
    within = decide(Ending(stop="wall", status=signal.SIGKILL, watched_peak=256 << 20), LIMITS)
    assert within[0] is Verdict.TIME_LIMIT  # at the limit is within it


def test_a_no_cgroup_peak_is_the_programs_not_cmxs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole no-cgroup path (the empty groups a non-root user gets): after this process
    itself has held 300 MiB, a small program's peak is still small (bwrap's own ru_maxrss
    carries the parent's high-water mark through fork and exec, so it is never read), and a
    300 MiB one is a memory verdict with its peak measured."""
    from cmx_core.api import SandboxSpec
    from cmx_core.sandbox import bubblewrap
    from cmx_core.sandbox.cgroups import RunGroups

    if bubblewrap.BubblewrapSandbox().available() or not os.path.exists("/usr/bin/python3"):
        pytest.skip("the bubblewrap sandbox cannot run here")
    monkeypatch.setattr(bubblewrap, "make_groups", lambda wanted: RunGroups())
    ballast = bytearray(300 << 20)
    ballast[::4096] = b"x" * (len(ballast) // 4096)
    box = bubblewrap.BubblewrapSandbox()
    small = box.run(SandboxSpec(argv=["/usr/bin/python3", "-c", "print(1)"], work_dir=tmp_path,
                                limits=Limits(wall_s=30, memory_bytes=256 << 20)))
    del ballast
    assert small.ok, small
    assert small.peak_memory_bytes is not None and small.peak_memory_bytes < 100 << 20, small.peak_memory_bytes
    assert small.enforced_by["memory"] == "watchdog-rss" and small.cpu_s is not None
    big = box.run(SandboxSpec(argv=["/usr/bin/python3", "-c", "b = bytearray(300 << 20); b[::4096] = b'x' * 76800"],
                              work_dir=tmp_path, limits=Limits(wall_s=30, memory_bytes=256 << 20)))
    assert big.verdict is Verdict.MEMORY_LIMIT and big.peak_memory_bytes is not None
    assert big.peak_memory_bytes > 256 << 20
