"""Per-point overhead of the ray executor beyond the same far command run without Ray
(prints numbers; asserts nothing about time).

Starts a private Ray head on 127.0.0.1 (its own temp dir, 2 CPUs, stopped by PID). The
baseline is the **no-Ray executor** defined here: the ray executor with Ray taken out, whose
``submit`` calls the task body (``cmx_ray.far.run_far``: the far ``cmx run --lock`` in a
private directory, its files returned) in this process. So the near engine (plan, lock,
record), the staging and the far command are the same on both sides (with
``OMP_NUM_THREADS`` set to the task's CPUs, as Ray sets it in a task's environment), and the
difference is what Ray adds: submission, scheduling, the worker, moving the lock and the
files through the object store. A negative difference is within the noise of a loaded machine.

* **sequential**: ``engine.run_tags(..., executor=X)`` K times for each of ``ray`` and the
  baseline, interleaved (one of each in turn, so a load change on a shared machine hits both);
  overhead = median of the pairwise differences.
* **batch** (the sweep path, ``cmx_ray.batch.run_batch``): N points of the demo chain as Ray
  tasks over one connection, against the same N far commands run by the baseline in a thread
  pool as wide as the head's CPUs, in blocks of 10 points, baseline and Ray in turn (each Ray
  block one ``run_batch``, all its tasks submitted at once); overhead per point = (ray wall -
  baseline wall) / N.
* **sweep** (``cmx sweep --executor ray -j N``: ``cmx_core.sweep.runner.run_sweep`` in this process,
  which plans every point, hands them all to cmx-ray's batch entry and records each result):
  one N-point sweep of the demo chain, against N far commands run by the baseline as above
  (half before the sweep, half after, so a load drift hits both); overhead per point = (sweep
  wall - baseline wall) / N. Here the baseline's requests are made before its clock starts,
  so the sweep's planning, locks and recording count as its overhead.
* the bare Ray task round trip (submit + get of a no-op), the scheduler's own latency.

How cost grows: the batch and the sweep submit every task over one connection and plan,
stage and record each point once, so their work per point does not depend on N; the
points wait for the head's CPUs, which the baseline's pool as wide as them waits for too.

Goal: Ray <= 0.2 s per point.

    .venv/bin/python benchmarks/bench_scale_ray.py [--points 100] [--sequential 6]
    .venv/bin/python benchmarks/bench_scale.py --executor ray    # the same numbers

CMX_HOME is a temporary directory so the benchmark leaves your cache alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HEAD_CPUS = 2


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_head(temp: str) -> tuple[subprocess.Popen[bytes], str, float]:
    from cmx_ray.cluster import RAY_ENV

    port = _port()
    began = time.perf_counter()
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
                             "--node-ip-address=127.0.0.1", f"--port={port}", f"--num-cpus={HEAD_CPUS}",
                             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
                            env={**os.environ, **RAY_ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return head, f"127.0.0.1:{port}", time.perf_counter() - began
        time.sleep(0.1)
    raise SystemExit("ray head did not start within 120 s")


def _stop_head(head: subprocess.Popen[bytes], temp: str) -> None:
    """SIGTERM to the head we started, then SIGKILL to what it left (processes naming our
    private temp dir), by PID."""
    head.send_signal(signal.SIGTERM)
    head.wait(timeout=60)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if temp.encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def _baseline_executor() -> Any:
    """The ray executor without Ray: the far task body called in this process."""
    from cmx_core.api import ExecutionOutcome, ExecutionRequest, JobStatus, RemoteExecutor, RemoteJob
    from cmx_ray import far
    from cmx_ray.executor import RayExecutor, RayHandle, _status
    from cmx_ray.resources import task_resources
    from cmx_ray.settings import RaySettings

    class NoRay(RayExecutor):
        name = "noray-baseline"
        summary = "the ray executor's far side without Ray (a benchmark baseline)"

        def run(self, request: ExecutionRequest) -> ExecutionOutcome:
            return RemoteExecutor.run(self, request)

        def submit(self, job: RemoteJob) -> RayHandle:
            settings = job.request.context.settings
            assert isinstance(settings, RaySettings)
            resources = task_resources(job.request.context.plan, settings, None)
            handle = RayHandle(None, resources, None, "none (baseline)")
            env = {"OMP_NUM_THREADS": f"{max(1, int(resources.num_cpus))}", **job.env}  # as Ray sets it for a task
            handle.result = far.run_far(list(job.command), env, (job.stage_dir / "lock.json").read_bytes(),
                                        int(settings.max_result_mb * 1e6))
            return handle

        def wait(self, handle: RayHandle) -> JobStatus:
            assert handle.result is not None
            return _status(handle.result)

        def cancel(self, handle: RayHandle) -> None:
            """Nothing runs after submit returns."""

    return NoRay()


def _register_baseline() -> None:
    from cmx_core.api import hookimpl
    from cmx_core.plugins import loader as plugins

    baseline = _baseline_executor()

    class _Plugin:
        @hookimpl
        def cmx_register_executors(self, register: Callable[[Any], None]) -> None:
            register(baseline.executor())

    plugins._REGISTRY = plugins.load_registry(extra=[("bench-noray", _Plugin())])


def _timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def _sequential(runs: int, opts: dict[str, str]) -> dict[str, Any]:
    from cmx_core.run import engine

    rayed: list[float] = []
    base: list[float] = []
    for i in range(runs):
        for name, size, into in (("ray", 2000 + i, rayed), ("noray-baseline", 4000 + i, base)):
            began = time.perf_counter()
            engine.run_tags("demo,sort", {"size": size, "repeats": 1}, executor=name, options=opts)
            into.append(time.perf_counter() - began)
    pairs = [r - b for r, b in zip(rayed, base, strict=True)]
    return {"runs": runs, "ray_median_s": statistics.median(rayed), "baseline_median_s": statistics.median(base),
            "overhead_per_point_s": statistics.median(pairs)}


def _requests(sizes: Sequence[int], base: Path, settings: Any) -> list[Any]:
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


def _batch(points: int, address: str, work: Path, block: int = 10) -> dict[str, Any]:
    """The N points in blocks of ``block``, baseline and Ray in turn (a load change on a shared
    machine hits both); each Ray block one ``run_batch`` over the kept connection."""
    from cmx_ray.batch import run_batch
    from cmx_ray.settings import RaySettings

    settings = RaySettings(address=address, env=("CMX_HOME",))
    baseline = _baseline_executor()
    ray_wall = base_wall = 0.0
    failed = 0
    for first in range(0, points, block):
        count = min(block, points - first)
        base_requests = _requests([10_000 + first + i for i in range(count)], work / "baseline", settings)
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=HEAD_CPUS) as pool:
            base_outcomes = list(pool.map(baseline.run, base_requests))
        base_wall += time.perf_counter() - began
        ray_requests = _requests([20_000 + first + i for i in range(count)], work / "ray", settings)
        began = time.perf_counter()
        outcomes = run_batch(ray_requests, settings)
        ray_wall += time.perf_counter() - began
        failed += sum(o.error is not None for o in (*outcomes, *base_outcomes))
    return {"points": points, "block": block, "failed": failed, "parallel": HEAD_CPUS, "ray_wall_s": ray_wall,
            "baseline_wall_s": base_wall, "overhead_per_point_s": (ray_wall - base_wall) / points}


def _sweep(points: int, address: str, work: Path) -> dict[str, Any]:
    """One N-point ``cmx sweep --executor ray -j N`` against the baseline's N far commands."""
    from cmx_core import paths
    from cmx_core.sweep.runner import SweepRequest, run_sweep
    from cmx_ray.settings import RaySettings

    settings = RaySettings(address=address, env=("CMX_HOME",))
    baseline = _baseline_executor()

    def base_block(first: int, count: int) -> tuple[float, int]:
        requests = _requests([30_000 + first + i for i in range(count)], work / "sweep-baseline", settings)
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=HEAD_CPUS) as pool:
            outcomes = list(pool.map(baseline.run, requests))
        return time.perf_counter() - began, sum(o.error is not None for o in outcomes)

    half = points // 2
    before, failed_before = base_block(0, half)
    options = ["--executor", "ray", "--executor-opt", f"address={address}", "--executor-opt", "env=CMX_HOME"]
    began = time.perf_counter()
    result = run_sweep(SweepRequest("demo,sort", {"repeats": "1"},
                                    [{"size": str(40_000 + i)} for i in range(points)], data_dir=paths.data_dir(),
                                    jobs=points, executor="ray", run_options=options))
    sweep_wall = time.perf_counter() - began
    after, failed_after = base_block(half, points - half)
    return {"points": points, "failed": result.failed + failed_before + failed_after, "parallel": HEAD_CPUS,
            "sweep_wall_s": sweep_wall, "baseline_wall_s": before + after,
            "overhead_per_point_s": (sweep_wall - before - after) / points}


def _connect(opts: dict[str, str], tries: int = 4) -> None:
    """The first run, retried a few times: a head on a loaded machine may listen before its
    GCS accepts drivers."""
    from cmx_core.errors import UsageError
    from cmx_core.run import engine

    for attempt in range(tries):
        try:
            engine.run_tags("demo,sort", executor="ray", options=opts)
            return
        except UsageError:
            if attempt == tries - 1:
                raise
            time.sleep(5.0)


def bench_ray(points: int, sequential: int) -> dict[str, Any]:
    """The Ray numbers, with a private head started and stopped here (CMX_HOME must be set)."""
    from cmx_core.run import engine
    from cmx_ray import cluster

    home = os.environ["CMX_HOME"]
    _register_baseline()
    temp = tempfile.mkdtemp(prefix="cmx-bench-ray-head-")
    head, address, started = _start_head(temp)
    try:
        opts = {"address": address, "env": "CMX_HOME"}
        _connect(opts)  # connect, warm the cache and a worker
        engine.run_tags("demo,sort", executor="noray-baseline", options=opts)
        with cluster.ray_env():
            import ray

            noop = ray.remote(lambda: None)
            ray.get(noop.remote())
            bare = statistics.median(_timed(lambda: ray.get(noop.remote())) for _ in range(20))
        return {"ray_head_start_s": started, "bare_task_round_trip_s": bare,
                "sequential": _sequential(sequential, opts) if sequential else None,
                "batch": _batch(points, address, Path(home) / "batch") if points else None,
                "sweep": _sweep(points, address, Path(home) / "sweep") if points else None,
                "goal_per_point_s": 0.2}
    finally:
        cluster.disconnect()
        _stop_head(head, temp)
        shutil.rmtree(temp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--points", type=int, default=100, help="points of the batched sweep (0: none)")
    parser.add_argument("--sequential", type=int, default=6, help="single runs of each executor, interleaved")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="cmx-bench-ray-")
    os.environ["CMX_HOME"] = home
    from cmx_ray.cluster import ray_env  # deferred: as bench_ray's imports

    try:
        with ray_env():  # the head's variables are its driver's too (cmx sets none for a given address)
            numbers = bench_ray(args.points, args.sequential)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(numbers, indent=2))


if __name__ == "__main__":
    main()
