"""Per-run overhead of the ray executor, printed as numbers.

Starts a private Ray head on 127.0.0.1 (its own temp dir, stopped by PID), then runs the demo
chain N times (default N=20; the issue's benchmark is --points 100) through:

* ``subprocess``-like baseline: the same far command (``python -m cmx_core run --lock ...``)
  with no scheduler, via the ray task body called directly (cmx_ray.far.run_far);
* a bare Ray task (the scheduler's own latency: submit + get of a no-op);
* ``--executor ray`` connected to the head.

Overhead per point = ray run - baseline run - bare task latency. With ``--private`` it also
times a run with a private in-process cluster and ``ray start --head`` + connect + stop.

    .venv/bin/python benchmarks/bench_scale_ray.py --points 100
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_head(temp: str) -> tuple[subprocess.Popen[bytes], str, float]:
    from cmx_ray.cluster import RAY_ENV

    port = _port()
    began = time.perf_counter()
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
                             "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
                            env={**os.environ, **RAY_ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return head, f"127.0.0.1:{port}", time.perf_counter() - began
        time.sleep(0.1)
    raise SystemExit("ray head did not start")


def _stop_head(head: subprocess.Popen[bytes], temp: str) -> None:
    head.send_signal(signal.SIGTERM)
    head.wait(timeout=60)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if temp.encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def _time(fn: object, n: int) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - began)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--private", action="store_true", help="also time the private-cluster options")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="cmx-bench-ray-")
    os.environ["CMX_HOME"] = home
    from cmx_ray import cluster, far

    from cmx_core import engine

    temp = tempfile.mkdtemp(prefix="cmx-bench-ray-head-")
    head, address, started = _start_head(temp)
    try:
        opts = {"address": address, "env": "CMX_HOME"}
        engine.run("demo,sort", executor="ray", options=opts)  # connect and warm up
        with cluster.ray_env():
            import ray

            noop = ray.remote(lambda: None)
            ray.get(noop.remote())
            bare = _time(lambda: ray.get(noop.remote()), args.points)
        result = engine.run("demo,sort", executor="local")
        lock = (result.run_dir / "lock.json").read_bytes()
        command = [sys.executable, "-m", "cmx_core", "run", "--lock", "lock.json", "--allow-drift=remote",
                   "--executor", "local", "--output", "remote", "--json"]
        base = _time(lambda: far.run_far(command, {"CMX_HOME": home}, lock, 1 << 28), args.points)
        rayed = _time(lambda: engine.run("demo,sort", executor="ray", options=opts), args.points)
        local = _time(lambda: engine.run("demo,sort", executor="local"), args.points)
    finally:
        cluster.disconnect()
        _stop_head(head, temp)
    med = statistics.median
    print(f"points: {args.points}")
    print(f"ray head start (ray start --head, to listening): {started:.2f} s")
    print(f"local executor run, median: {med(local):.3f} s")
    print(f"far command without a scheduler (run_far), median: {med(base):.3f} s")
    print(f"bare Ray task round trip, median: {med(bare) * 1000:.1f} ms")
    print(f"ray executor run, median: {med(rayed):.3f} s; total for {args.points} points: {sum(rayed):.1f} s")
    print(f"ray overhead per point beyond the far command and the scheduler: "
          f"{med(rayed) - med(base) - med(bare):.3f} s (goal <= 0.2 s)")
    if args.private:
        private = _time(lambda: engine.run("demo,sort", executor="ray", options={"env": "CMX_HOME"}), 2)
        print(f"one run with a private in-process cluster (ray.init local + shutdown), median: {med(private):.2f} s")
        temp2 = tempfile.mkdtemp(prefix="cmx-bench-ray-head-")
        began = time.perf_counter()
        head2, address2, _ = _start_head(temp2)
        engine.run("demo,sort", executor="ray", options={"address": address2, "env": "CMX_HOME"})
        cluster.disconnect()
        _stop_head(head2, temp2)
        print(f"one run with a private head process (ray start + connect + stop by PID): "
              f"{time.perf_counter() - began:.2f} s")


if __name__ == "__main__":
    main()
