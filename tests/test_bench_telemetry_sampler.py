"""benchmarks/bench_telemetry_sampler.py runs beside idle processes that are not the run's and
prints one JSON document: the sampler's CPU per round, the old way and the current one, and
the run's processes each found (its timings are measurements, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_telemetry_sampler.py"


def test_the_benchmark_compares_the_two_ways_and_both_find_only_the_run() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--others", "20", "--rounds", "2", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["others"] == 20 and report["machine_processes"] >= 20
    for way in ("before", "after"):
        assert report[way]["run_processes_found"] == 2  # this process and its one child, none of the 20
        assert report[way]["cpu_per_round_ms"] >= 0 and "share_of_one_core_at_1hz_pct" in report[way]
