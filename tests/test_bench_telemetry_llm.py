"""benchmarks/bench_telemetry_llm.py alternates the main job with telemetry on and off in
ABBA order and summarises each pair's change (its numbers are measurements, never asserted;
a run of the script is minutes of the real main job, so its pairing and arithmetic are
checked here, and docs/telemetry.md reports what it printed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_telemetry_llm.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_telemetry_llm", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_runs_alternate_abba_so_a_drift_cancels() -> None:
    order = _bench().abba(4)
    assert [on for _, on in order] == [True, False, False, True, True, False, False, True]
    assert [pair for pair, _ in order] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_each_pair_is_compared_and_the_noise_of_the_unsampled_runs_shown() -> None:
    bench = _bench()
    runs = [bench.Run(0, True, 99.0, "valid"), bench.Run(0, False, 100.0, "valid"),
            bench.Run(1, False, 110.0, "valid"), bench.Run(1, True, 111.1, "valid")]
    report = bench.summary(runs)
    assert report["pairs"] == 2 and report["pair_change_pct"] == [-1.0, 1.0]
    assert report["median_change_pct"] == 0.0 and report["change_range_pct"] == [-1.0, 1.0]
    assert report["spread_off_pct"] == round(100 * 10 / 105, 3)
