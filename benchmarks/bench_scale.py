"""Per-run overhead of the scale-out executors beyond their scheduler's own latency (prints
numbers; asserts nothing about time). One function per executor (``bench_slurm`` now; a
``bench_ray`` can sit beside it and be added to ``BENCHES``).

Slurm, for a sweep of N points of the demo chain (``demo,sort``, size 1000 + i):

* **array**: the N points as one job array (``cmx_slurm.array``). Per point, the
  scheduler's latency is ``started - submitted`` (the batch script's first act stamps
  ``started``); the executor's overhead is what it adds beyond that: its share of staging
  and sbatch (``staging / N``), the far side's time beyond the same point run in-process
  (``(ended - started) - local wall``: starting Python, replaying the lock, detecting facts),
  and the delay between the last script ending and the outcomes being back (end detection
  and folding).
* **sequential**: ``engine.run(..., executor="slurm")`` K times; overhead = wall - (started -
  sbatch returned) - local wall.

Goal: Slurm <= 1 s per point beyond the sbatch-to-start latency.

Usage (a Slurm must answer through SLURM_CONF, or, as root, a private one is started with
scripts/services/slurm.sh and stopped by PID)::

    .venv/bin/python benchmarks/bench_scale.py [--points 100] [--sequential 5]

The default is 20 points (about a minute here); the goal is stated for --points 100.
CMX_HOME is a temporary directory so the benchmark leaves your cache alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _local_walls(sizes: list[int]) -> dict[int, float]:
    """The in-process wall time of each point with the local executor (warm cache)."""
    from cmx_core import engine

    walls = {}
    for size in sizes:
        start = time.perf_counter()
        engine.run("demo,sort", {"size": size, "repeats": 1}, executor="local")
        walls[size] = time.perf_counter() - start
    return walls


def _stamp(path: Path, index: int = 0) -> float:
    return float(path.read_text().split()[index])


def _slurm_array(points: int, base: Path) -> dict[str, Any]:
    from cmx_slurm.array import collect, submit_array
    from cmx_slurm.settings import SlurmSettings

    from cmx_core import engine
    from cmx_core.api import ExecutionRequest
    from cmx_core.runids import new_run_id

    sizes = [1000 + i for i in range(points)]
    local = _local_walls(sizes)
    settings = SlurmSettings()
    t0 = time.time()
    session = engine.open_session()
    requests = []
    for size in sizes:
        plan = engine.plan("demo,sort", {"size": size, "repeats": 1}, session=session)
        run_dir = base / f"point-{size}"
        run_dir.mkdir(parents=True)
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(plan=plan, facts=session.facts, registry=session.registry,
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id(),
                                         settings=settings))
    array = submit_array(requests, settings)
    submitted = time.time()
    outcomes = collect(array)
    back = time.time()
    failed = [o.error.message for o in outcomes if o.error is not None]
    stages = [r.run_dir / "remote-stage" for r in requests]
    started = [_stamp(s / "started") for s in stages]
    ended = [_stamp(s / "ended", 1) for s in stages]
    far_extra = [(e - s) - local[size] for s, e, size in zip(started, ended, sizes, strict=True)]
    staging = submitted - t0
    tail = back - max(ended)
    return {
        "points": points, "failed": len(failed), "wall_s": back - t0,
        "latency_median_s": statistics.median(s - submitted for s in started),
        "latency_max_s": max(s - submitted for s in started),
        "staging_per_point_s": staging / points,
        "far_extra_median_s": statistics.median(far_extra),
        "end_detect_s": tail,
        "overhead_per_point_s": staging / points + statistics.median(far_extra) + tail / points,
    }


def _slurm_sequential(runs: int) -> dict[str, Any]:
    from cmx_core import engine

    sizes = [5000 + i for i in range(runs)]
    local = _local_walls(sizes)
    overheads, latencies = [], []
    for size in sizes:
        start = time.time()
        run = engine.run("demo,sort", {"size": size, "repeats": 1}, executor="slurm")
        wall = time.time() - start
        stage = run.run_dir / "remote-stage"
        latency = _stamp(stage / "started") - (stage / "slurm-job.json").stat().st_mtime
        latencies.append(latency)
        overheads.append(wall - latency - local[size])
    return {"runs": runs, "latency_median_s": statistics.median(latencies),
            "overhead_median_s": statistics.median(overheads), "overhead_max_s": max(overheads)}


def bench_slurm(points: int, sequential: int) -> dict[str, Any]:
    """The Slurm numbers (a cluster through SLURM_CONF, or a private one when root)."""
    from cmx_slurm.testing import answers, start_private, stop_private

    cluster = None
    work = Path(tempfile.mkdtemp(prefix="cmxslurm-bench-"))
    if not (os.environ.get("SLURM_CONF") and answers(os.environ["SLURM_CONF"])):
        cluster = start_private(work)
        os.environ["SLURM_CONF"] = cluster.conf
    try:
        return {"array": _slurm_array(points, work / "sweep"),
                "sequential": _slurm_sequential(sequential) if sequential else None}
    finally:
        if cluster is not None:
            stop_private(cluster)
            os.environ.pop("SLURM_CONF", None)
        shutil.rmtree(work, ignore_errors=True)


BENCHES: dict[str, Callable[[int, int], dict[str, Any]]] = {"slurm": bench_slurm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--executor", action="append", choices=sorted(BENCHES), help="default: all")
    parser.add_argument("--points", type=int, default=20, help="sweep points (the goal is stated for 100)")
    parser.add_argument("--sequential", type=int, default=3, help="single runs one after another (0: none)")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="cmx-bench-scale-")
    os.environ["CMX_HOME"] = home
    try:
        for name in args.executor or sorted(BENCHES):
            numbers = BENCHES[name](args.points, args.sequential)
            print(f"{name}: {json.dumps(numbers, indent=2)}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
