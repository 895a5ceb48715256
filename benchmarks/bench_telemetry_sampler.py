"""What one sampling round costs with many unrelated processes on the machine (issue #46):
the run sampler's CPU share at 1 Hz, the current sampler against the way it found the run's
processes before, in one run.

    .venv/bin/python benchmarks/bench_telemetry_sampler.py [--others 1000] [--rounds 30] [--json]

1. ``--others`` idle processes (``sleep``) are started beside the run, not in its tree: a
   launcher starts them in a session of their own and exits, so they belong to init.
2. The run is this process and one child (``sleep``), sampled by a real
   :class:`RunTelemetry` (every probe: the process tree, the machine, GPUs and RAPL where
   present). Its rounds are taken ``--rounds`` times per way, the two ways in alternation
   (ABBA), each timed by the CPU time of this thread (``time.thread_time``): the share of one
   core at 1 Hz is the median CPU per round over one second.
3. ``before`` finds the run's processes as the sampler did before: :func:`old_members`,
   psutil's ``children(recursive=True)``, which reads every process on the machine each
   round. ``after`` is the current sampler (:class:`ProcessTree`: the known processes and the
   children the kernel lists for them).

Every process it starts is stopped by its PID before it exits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings
from cmx_core.telemetry.probes import ProcessTree

LAUNCHER = """
import subprocess, sys
quiet = subprocess.DEVNULL  # not the pipe this launcher answers on: its reader waits for EOF
pids = [subprocess.Popen(["sleep", "3600"], start_new_session=True, stdin=quiet, stdout=quiet, stderr=quiet).pid
        for _ in range(int(sys.argv[1]))]
print(" ".join(map(str, pids)), flush=True)
"""


def old_members(tree: ProcessTree) -> list[Any]:
    """The run's processes the way the sampler found them before issue #46: psutil's
    ``children(recursive=True)``, which reads the parent of every process on the machine."""
    root = psutil.Process(tree._root.pid)
    try:
        children = root.children(recursive=True)
    except psutil.Error:
        children = []
    members = [tree._root]
    for child in children:
        members.append(tree._known.setdefault(child.pid, child))
    return members


class OldTree(ProcessTree):
    """The current probe with the old way of finding the tree's members."""

    def _members(self) -> list[Any]:
        return old_members(self)


def start_others(count: int) -> list[int]:
    done = subprocess.run([sys.executable, "-c", LAUNCHER, str(count)], capture_output=True, text=True,
                          check=True, timeout=600)
    return [int(pid) for pid in done.stdout.split()]


def stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def round_cpu_s(telemetry: RunTelemetry) -> float:
    start = time.thread_time()
    telemetry.sample()
    return time.thread_time() - start


def measure(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        telemetry = RunTelemetry("bench", Path(tmp), TelemetrySettings(interval_s=3600.0))
        telemetry.start()  # the thread waits an hour between rounds: the rounds below are ours
        try:
            ways = {"after": telemetry._probes[0], "before": ("process", OldTree(os.getpid()))}
            found = {}
            spent: dict[str, list[float]] = {"before": [], "after": []}
            for i in range(rounds):
                for way in (("after", "before") if i % 2 == 0 else ("before", "after")):
                    telemetry._probes[0] = ways[way]
                    spent[way].append(round_cpu_s(telemetry))
                    found[way] = next(v for n, _, v in telemetry.latest().points  # type: ignore[union-attr]
                                      if n == "cmx_process_processes")
            telemetry._probes[0] = ways["after"]
        finally:
            telemetry.stop()
    out: dict[str, Any] = {}
    for way, values in spent.items():
        median = statistics.median(values)
        out[way] = {"cpu_per_round_ms": round(1000 * median, 3), "share_of_one_core_at_1hz_pct": round(100 * median, 3),
                    "run_processes_found": found[way]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--others", type=int, default=1000, help="idle processes started beside the run")
    parser.add_argument("--rounds", type=int, default=30, help="rounds timed per way")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit)  # a timeout's TERM still stops what was started
    step = subprocess.Popen(["sleep", "3600"])  # the run's own child
    others: list[int] = []
    try:
        others = start_others(args.others)
        report = {"machine_processes": len(psutil.pids()), "others": len(others), "cpus": os.cpu_count(),
                  **measure(args.rounds)}
    finally:
        stop(others)
        os.kill(step.pid, signal.SIGTERM)
        step.wait(timeout=60)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['machine_processes']} processes on the machine ({report['others']} idle ones started "
              f"beside the run), {report['cpus']} CPUs")
        for way in ("before", "after"):
            r = report[way]
            print(f"{way:>6}: {r['cpu_per_round_ms']:.3f} ms CPU per round = {r['share_of_one_core_at_1hz_pct']:.3f} % "
                  f"of one core at 1 Hz ({r['run_processes_found']:g} run processes found)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
