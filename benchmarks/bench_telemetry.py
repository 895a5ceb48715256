"""What the run sampler costs (docs/telemetry.md): its own CPU at 1 Hz, and its effect on a
main job's throughput, measured by alternating runs with the sampler on and off.

    .venv/bin/python benchmarks/bench_telemetry.py [--seconds 20] [--pairs 6] [--json]

1. **Sampler cost**: a :class:`RunTelemetry` samples this process (and its tree) at the
   interval for ``--seconds``; the CPU time of the sampler's own thread (``/proc`` per-thread
   times through psutil) over the wall time is its share of one core.
2. **Effect on the main job**: a CPU-bound child process (a "token" is one SHA-256 of a 4 KiB
   block) runs for a fixed number of tokens, ``--pairs`` times with the sampler on and off in
   alternation (on, off, off, on, ...: an ABBA order cancels a slow drift of the machine); the
   result is the median tokens/s of each arm and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings

JOB = """
import hashlib, sys, time
block = b"x" * 4096
n = int(sys.argv[1])
start = time.perf_counter()
for _ in range(n):
    hashlib.sha256(block).digest()
print(n / (time.perf_counter() - start))
"""


def sampler_cost(seconds: float, interval_s: float) -> dict[str, Any]:
    import psutil

    with tempfile.TemporaryDirectory() as tmp:
        telemetry = RunTelemetry("bench", Path(tmp), TelemetrySettings(interval_s=interval_s))
        telemetry.start()
        thread = telemetry._thread
        assert thread is not None and thread.native_id is not None
        native = thread.native_id
        me = psutil.Process()

        def thread_cpu() -> float:
            for t in me.threads():
                if t.id == native:
                    return float(t.user_time + t.system_time)
            return 0.0

        first_cpu, first_wall = thread_cpu(), time.monotonic()
        time.sleep(seconds)
        cpu, wall = thread_cpu() - first_cpu, time.monotonic() - first_wall
        rounds = telemetry.samples
        telemetry.stop()
    return {"interval_s": interval_s, "wall_s": round(wall, 3), "sampler_cpu_s": round(cpu, 4),
            "rounds": rounds, "cpu_per_round_ms": round(1000 * cpu / max(1, rounds), 3),
            "share_of_one_core_pct": round(100 * cpu / wall, 3)}


def _job(tokens: int) -> float:
    done = subprocess.run([sys.executable, "-c", JOB, str(tokens)], capture_output=True, text=True, check=True,
                          timeout=600)
    return float(done.stdout.strip())


def _sampled_job(tokens: int, interval_s: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        telemetry = RunTelemetry("bench", Path(tmp), TelemetrySettings(interval_s=interval_s))
        telemetry.start()
        try:
            return _job(tokens)
        finally:
            telemetry.stop()


def job_effect(pairs: int, tokens: int, interval_s: float) -> dict[str, Any]:
    on: list[float] = []
    off: list[float] = []
    order = [True, False, False, True] * ((pairs + 1) // 2)
    for sampled in order[: 2 * pairs]:
        (on if sampled else off).append(_sampled_job(tokens, interval_s) if sampled else _job(tokens))
    median_on, median_off = statistics.median(on), statistics.median(off)
    return {"pairs": pairs, "tokens_per_run": tokens, "tokens_per_s_on": round(median_on, 1),
            "tokens_per_s_off": round(median_off, 1),
            "change_pct": round(100 * (median_on - median_off) / median_off, 3),
            "spread_off_pct": round(100 * (max(off) - min(off)) / median_off, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the sampler cost is measured")
    parser.add_argument("--pairs", type=int, default=6, help="on/off pairs of the main job")
    parser.add_argument("--tokens", type=int, default=300_000, help="tokens (SHA-256 of 4 KiB) per job run")
    parser.add_argument("--interval", type=float, default=1.0, help="sampling interval, seconds")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    threading.current_thread().name = "bench"
    report = {"sampler": sampler_cost(args.seconds, args.interval),
              "main_job": job_effect(args.pairs, args.tokens, args.interval)}
    if args.json:
        print(json.dumps(report))
    else:
        s, j = report["sampler"], report["main_job"]
        print(f"sampler at {s['interval_s']:g} s: {s['share_of_one_core_pct']:.3f} % of one core "
              f"({s['cpu_per_round_ms']:.2f} ms CPU per round, {s['rounds']} rounds)")
        print(f"main job: {j['tokens_per_s_on']:.0f} tokens/s sampled vs {j['tokens_per_s_off']:.0f} not "
              f"({j['change_pct']:+.2f} %; the unsampled runs spread {j['spread_off_pct']:.2f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
