"""benchmarks/bench_telemetry_windows.py: the sampler switched on and off in ABBA windows of
one generation run, each window's tokens counted from the job's own stamps (the numbers are
measurements, never asserted: docs/telemetry.md reports what it printed). Its schedule and
arithmetic are checked here, and one short real run of the script."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_telemetry_windows.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_telemetry_windows", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_windows_alternate_abba_back_to_back() -> None:
    schedule = _bench().windows(3, 2.0, 100.0)
    assert [(pair, on) for pair, on, _, _ in schedule] == [(0, True), (0, False), (1, False), (1, True),
                                                          (2, True), (2, False)]
    assert [(begin, end) for _, _, begin, end in schedule] == [(100.0 + 2 * k, 102.0 + 2 * k) for k in range(6)]


def test_each_window_counts_the_tokens_stamped_inside_it() -> None:
    bench = _bench()
    schedule = bench.windows(1, 1.0, 10.0)  # on: [10, 11), off: [11, 12)
    stamps = array("d", [9.9, 10.0, 10.5, 10.999, 11.0, 11.2, 12.0])
    assert bench.rates(stamps, schedule) == {0: {True: 3.0, False: 2.0}}


def test_the_bootstrap_interval_holds_the_median() -> None:
    low, high = _bench().bootstrap_median([-1.0, -0.5, 0.0, 0.2, 0.4, 0.6, 1.0])
    assert -1.0 <= low <= 0.2 <= high <= 1.0


def test_a_short_real_run_prints_one_json_document(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--pairs", "2", "--window", "1", "--home", str(tmp_path),
                           "--json"], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["pairs"] == 2 and len(report["pair_change_pct"]) == 2 and report["tokens"] > 0
    assert report["tokens_per_s_on_median"] > 0 and report["tokens_per_s_off_median"] > 0
    low, high = report["median_change_95ci_pct"]
    assert low <= high
