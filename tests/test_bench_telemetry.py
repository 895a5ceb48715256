"""benchmarks/bench_telemetry.py runs and prints one JSON document with the numbers
docs/telemetry.md reports (its timings are measurements, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_telemetry.py"


def test_the_benchmark_reports_the_sampler_cost_and_the_job_effect() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--seconds", "1.5", "--interval", "0.25", "--pairs", "1",
                           "--tokens", "2000", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    sampler, job = report["sampler"], report["main_job"]
    assert sampler["rounds"] >= 2 and sampler["sampler_cpu_s"] >= 0 and "share_of_one_core_pct" in sampler
    assert job["pairs"] == 1 and job["tokens_per_s_on"] > 0 and job["tokens_per_s_off"] > 0
    assert set(job) >= {"change_pct", "spread_off_pct"}
