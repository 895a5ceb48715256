"""Where the test suite's wall time and CPU go, from a timeline its run wrote (#52 item 4).

    CMX_TEST_TIMELINE=/tmp/timeline.jsonl bash scripts/test.sh
    .venv/bin/python benchmarks/bench_suite_timeline.py /tmp/timeline.jsonl [--top 25]

The root ``conftest.py`` appends a line per test (its scope as the scheduler groups it, the
worker, its wall span, the CPU seconds of the worker and of the subprocesses it waited for),
and the controller a line at the start and end with the whole machine's busy CPU seconds.
Prints, per worker, how long it was busy and its last scope (the one that ends the run is the
critical path), then the scopes by wall time with their CPU. The machine's CPU that no test's
process tree accounts for (Docker builds in dockerd, Slurm and Ray daemons, other load) is
printed as one line.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Scope:
    name: str
    worker: str = ""
    tests: int = 0
    first_start: float = float("inf")
    last_stop: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    workers: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Timeline:
    start: float
    end: float
    machine_cpu_s: float
    scopes: dict[str, Scope]
    worker_busy_s: dict[str, float]
    worker_last: dict[str, tuple[float, str]]


def read_timeline(path: Path) -> Timeline:
    scopes: dict[str, Scope] = {}
    busy: dict[str, float] = defaultdict(float)
    last: dict[str, tuple[float, str]] = {}
    marks: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["event"] != "test":
            marks[record["event"]] = record
            continue
        scope = scopes.setdefault(record["scope"], Scope(record["scope"]))
        wall = record["stop"] - record["start"]
        scope.tests += 1
        scope.wall_s += wall
        scope.cpu_s += record["cpu_s"] + record["children_cpu_s"]
        scope.first_start = min(scope.first_start, record["start"])
        scope.last_stop = max(scope.last_stop, record["stop"])
        scope.workers.add(record["worker"])
        busy[record["worker"]] += wall
        if record["stop"] > last.get(record["worker"], (0.0, ""))[0]:
            last[record["worker"]] = (record["stop"], record["scope"])
    start = marks.get("start", {}).get("at", min(s.first_start for s in scopes.values()))
    end = marks.get("end", {}).get("at", max(s.last_stop for s in scopes.values()))
    machine = marks.get("end", {}).get("machine_cpu_s", 0.0) - marks.get("start", {}).get("machine_cpu_s", 0.0)
    return Timeline(start, end, machine, scopes, dict(busy), last)


def report(timeline: Timeline, top: int) -> str:
    lines = [f"run: {timeline.end - timeline.start:.0f} s wall; machine busy CPU "
             f"{timeline.machine_cpu_s:.0f} s"]
    for worker in sorted(timeline.worker_busy_s):
        stop, last_scope = timeline.worker_last[worker]
        lines.append(f"  {worker}: busy {timeline.worker_busy_s[worker]:.0f} s, last test ends at "
                     f"{stop - timeline.start:.0f} s ({last_scope})")
    attributed = sum(s.cpu_s for s in timeline.scopes.values())
    lines.append(f"CPU in the tests' own process trees: {attributed:.0f} s; elsewhere (engines, "
                 f"daemons, other load): {max(timeline.machine_cpu_s - attributed, 0.0):.0f} s")
    lines.append(f"{'wall s':>8} {'cpu s':>8} {'from':>6} {'to':>6} {'tests':>6}  scope")
    ranked = sorted(timeline.scopes.values(), key=lambda s: s.wall_s, reverse=True)
    for scope in ranked[:top]:
        lines.append(f"{scope.wall_s:8.0f} {scope.cpu_s:8.0f} {scope.first_start - timeline.start:6.0f} "
                     f"{scope.last_stop - timeline.start:6.0f} {scope.tests:6d}  {scope.name}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(report(read_timeline(args.timeline), args.top))


if __name__ == "__main__":
    main()
