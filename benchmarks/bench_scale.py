"""Per-run overhead of the scale-out executors beyond their scheduler's own latency (prints
numbers; asserts nothing about time). One function per executor (``bench_slurm`` here; Ray's
numbers, measured against the same far commands run without Ray, are
``benchmarks/bench_scale_ray.py``, which ``--executor ray`` runs).

Slurm, for a sweep of N points of the demo chain (``demo,sort``, size 1000 + i):

* **array**: the N points as one job array (``cmx_slurm.array``). Per point, the
  scheduler's latency is ``started - submitted`` (the batch script's first act stamps
  ``started``; with more points than CPUs it includes the wait for a free one); the
  executor's overhead is what it adds beyond that and beyond the far command itself (``cmx
  run --lock ...``, what the subprocess executor runs: starting Python, replaying the lock,
  detecting facts): its share of staging and sbatch (``staging / N``), the batch script's
  time before it launches the far command (``launched - started``: bash, ``scontrol show
  hostnames``; both stamped inside each job, so a load change between points cannot skew
  them), and its share of the delay between the last script ending and the outcomes being
  back (end detection by polling, and folding). The far command's own time, ``ended -
  launched``, is printed beside it.
* **sweep**: the same N points through ``cmx sweep`` (``cmx_core.sweep.runner.run_sweep`` with
  ``--executor slurm`` and ``-j N``, in this process), which plans every point, hands them to
  cmx-slurm's batch entry (one job array) and records each result. Measured like the array,
  so its staging (``submitted - t0``) also holds the planning of every point (checked as
  ``cmx plan`` would), the locks and the in-flight marks, and its tail the recording of every
  result and the manifest.
* **sequential**: ``engine.run_tags(..., executor="slurm")`` K times; overhead = wall - (started -
  sbatch returned) - (ended - launched), the far command's own time (the near engine's plan,
  lock and record are counted as overhead here).

How cost grows: the array's and the sweep's staging and recording are linear in N (one
stage directory, lock, plan and result per point), their sbatch is one call whatever N is and
the end detection (at most one poll interval) is shared by all points, so their overhead per
point does not grow with N; the scheduler's latency per point grows with N / CPUs, the wait
for a free CPU, which is the scheduler's and not counted. One ``cmx run`` per point costs a
whole Python start, plan and record per point (the sequential figure's near side).

Goal: Slurm <= 1 s per point beyond the sbatch-to-start latency.

Usage (a Slurm must answer through SLURM_CONF, or, as root, a private one is started with
scripts/services/slurm.sh and stopped by PID)::

    .venv/bin/python benchmarks/bench_scale.py [--points 100] [--sequential 3]

The default is the issue's 100 points (a few minutes on a loaded 2-CPU machine).
CMX_HOME is a temporary directory so the benchmark leaves your cache alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _requests(sizes: list[int], base: Path, settings: Any) -> list[Any]:
    """A prepared run (plan, run directory, lock) per size."""
    from cmx_core.api import ExecutionContext, ExecutionRequest
    from cmx_core.run import engine
    from cmx_core.run.runids import new_run_id

    session = engine.open_session()
    requests = []
    for size in sizes:
        plan = engine.plan_in(session, "demo,sort", {"size": size, "repeats": 1})
        run_dir = base / f"point-{size}"
        run_dir.mkdir(parents=True)
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(ExecutionContext(plan, settings, session.facts, session.registry),
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id()))
    return requests


def _node_cpus() -> int:
    """CPUs of the first Slurm node (how many array tasks run at once here)."""
    out = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, check=True, timeout=60).stdout
    return max(1, int(out.split()[0].rstrip("+")))


def _stamp(path: Path, index: int = 0) -> float:
    return float(path.read_text().split()[index])


def _slurm_array(points: int, base: Path) -> dict[str, Any]:
    from cmx_slurm.array import collect, submit_array
    from cmx_slurm.settings import SlurmSettings

    parallel = _node_cpus()
    settings = SlurmSettings()
    t0 = time.time()
    requests = _requests([1000 + i for i in range(points)], base / "sweep", settings)
    array = submit_array(requests, settings)
    submitted = time.time()
    outcomes = collect(array)
    back = time.time()
    failed = [o.error.message for o in outcomes if o.error is not None]
    stages = [r.run_dir / "remote-stage" for r in requests]
    started = [_stamp(s / "started") for s in stages]
    launched = [_stamp(s / "launched") for s in stages]
    ended = [_stamp(s / "ended", 1) for s in stages]
    script_extra = [la - s for s, la in zip(started, launched, strict=True)]
    staging = submitted - t0
    tail = back - max(ended)
    return {
        "points": points, "failed": len(failed), "parallel": parallel, "wall_s": back - t0,
        "latency_median_s": statistics.median(s - submitted for s in started),
        "latency_max_s": max(s - submitted for s in started),
        "far_command_median_s": statistics.median(e - la for la, e in zip(launched, ended, strict=True)),
        "staging_per_point_s": staging / points,
        "script_extra_median_s": statistics.median(script_extra),
        "end_detect_s": tail,
        "overhead_per_point_s": staging / points + statistics.median(script_extra) + tail / points,
        "goal_per_point_s": 1.0,
    }


def _slurm_sweep(points: int, data_dir: Path) -> dict[str, Any]:
    """The N points through ``cmx sweep --executor slurm -j N`` (run_sweep in this process)."""
    from cmx_core.sweep.runner import SweepRequest, run_sweep

    matrix = [{"size": str(3000 + i)} for i in range(points)]
    t0 = time.time()
    result = run_sweep(SweepRequest("demo,sort", {"repeats": "1"}, matrix, data_dir=data_dir, jobs=points,
                                    executor="slurm", run_options=["--executor", "slurm"]))
    back = time.time()
    run_dirs = [data_dir / "sweeps" / result.sweep_id / f"point-{p.index}" for p in result.points]
    stages = [d / "remote-stage" for d in run_dirs]
    arrays = {json.loads((s / "slurm-job.json").read_text())["array"] for s in stages}
    submitted = min((s / "slurm-job.json").stat().st_mtime for s in stages)  # written as sbatch returned
    started = [_stamp(s / "started") for s in stages]
    launched = [_stamp(s / "launched") for s in stages]
    ended = [_stamp(s / "ended", 1) for s in stages]
    script_extra = statistics.median(la - s for s, la in zip(started, launched, strict=True))
    staging = submitted - t0
    tail = back - max(ended)
    return {
        "points": points, "failed": result.failed, "job_arrays": len(arrays), "wall_s": back - t0,
        "latency_median_s": statistics.median(s - submitted for s in started),
        "latency_max_s": max(s - submitted for s in started),
        "far_command_median_s": statistics.median(e - la for la, e in zip(launched, ended, strict=True)),
        "staging_per_point_s": staging / points,
        "script_extra_median_s": script_extra,
        "end_detect_and_record_s": tail,
        "overhead_per_point_s": staging / points + script_extra + tail / points,
        "goal_per_point_s": 1.0,
    }


def _slurm_sequential(runs: int) -> dict[str, Any]:
    from cmx_core.run import engine

    overheads, latencies, far = [], [], []
    for size in [5000 + i for i in range(runs)]:
        start = time.time()
        run = engine.run_tags("demo,sort", {"size": size, "repeats": 1}, executor="slurm")
        wall = time.time() - start
        stage = run.run_dir / "remote-stage"
        latency = _stamp(stage / "started") - (stage / "slurm-job.json").stat().st_mtime
        latencies.append(latency)
        far.append(_stamp(stage / "ended", 1) - _stamp(stage / "launched"))
        overheads.append(wall - latency - far[-1])
    return {"runs": runs, "far_command_median_s": statistics.median(far),
            "latency_median_s": statistics.median(latencies),
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
        from cmx_core.run import engine

        engine.run_tags("demo,sort", {"size": 10, "repeats": 1}, executor="local")  # warm imports and caches
        from cmx_core import paths

        return {"array": _slurm_array(points, work / "sweep"),
                "sweep": _slurm_sweep(points, paths.data_dir()),
                "sequential": _slurm_sequential(sequential) if sequential else None}
    finally:
        if cluster is not None:
            stop_private(cluster)
            os.environ.pop("SLURM_CONF", None)
        shutil.rmtree(work, ignore_errors=True)


def bench_ray(points: int, sequential: int) -> dict[str, Any]:
    """The Ray numbers: ``benchmarks/bench_scale_ray.py`` (a private head on 127.0.0.1)."""
    import bench_scale_ray  # beside this file: its directory is on sys.path when run as a script

    return bench_scale_ray.bench_ray(points, sequential)


BENCHES: dict[str, Callable[[int, int], dict[str, Any]]] = {"slurm": bench_slurm, "ray": bench_ray}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--executor", action="append", choices=sorted(BENCHES), help="default: all")
    parser.add_argument("--points", type=int, default=100, help="sweep points (the issue's figure: 100)")
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
