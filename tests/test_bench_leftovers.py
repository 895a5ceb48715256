"""benchmarks/bench_leftovers.py runs a real sandboxed writer and prints the host's cost of
what it left, with everything brought back and with the keep cap (docs/sandbox.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cmx_core.sandbox.bubblewrap import BubblewrapSandbox

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_leftovers.py"


def test_the_leftovers_bench_prints_both_rows(require: Callable[[str | None, str], None]) -> None:
    require(BubblewrapSandbox().available(), "bubblewrap sandbox")
    done = subprocess.run([sys.executable, str(BENCH), "--mib", "8", "--files", "8", "--keep-mib", "2", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    everything, capped = figures["runs"]
    assert everything["keep_mib"] is None and everything["kept_mib"] == 8.0 and everything["dropped_files"] == 0
    assert capped["keep_mib"] == 2 and capped["kept_mib"] == 2.0 and capped["dropped_files"] == 6
    assert all(row["host_cpu_s"] >= 0 and row["program_wall_s"] > 0 for row in figures["runs"])
