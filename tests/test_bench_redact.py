"""benchmarks/bench_redact.py runs and prints its figures (the host cost of a run's
leftovers, docs/sandbox.md): one JSON line with the CPU and wall seconds of ``redact_tree``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_redact.py"


def test_the_redaction_bench_prints_its_figures() -> None:
    for kind in ("zeros", "text", "random", "keys", "prefixes"):
        done = subprocess.run([sys.executable, str(BENCH), "--mib", "4", "--files", "4", "--kind", kind, "--json"],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout)
        assert figures["mib"] == 4 and figures["kind"] == kind and figures["changed"] == 0
        assert figures["cpu_s"] >= 0 and figures["wall_s"] > 0 and figures["mib_per_s"] > 0
