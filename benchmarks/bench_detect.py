#!/usr/bin/env python3
"""Benchmark cmx-detect: cold `cmx detect` and warm `cmx run recipe --tags=detect,system`.

Prints wall times (median and min of N runs) and, in-process, how long each detector and each
fingerprint takes. Every run uses a private CMX_HOME under a temporary directory.

    python benchmarks/bench_detect.py [--runs 5] [--json]

Cold: a fresh CMX_HOME per run (nothing cached), so every detector probes the machine.
Warm: one untimed run fills the fact cache, then the timed runs only check fingerprints.
The warm-run target of cmx-core is 100 ms (shared/reference/anchors.md, target 1).
NVML: the cheap loader check (``nvml_library``) against the child interpreter it spares.

Before/after a change to cmx-detect, pair the cold runs: time the two commands as whole
processes, alternated (A B A B, e.g. 8 pairs), and quote the medians and the median of the
pair ratios (the older tree extracted with
``git archive <rev> plugins/detect/src | tar -x -C /tmp/before``):

    /usr/bin/time -f '%U %S %e' env PYTHONPATH=/tmp/before/plugins/detect/src cmx detect --json --refresh
    /usr/bin/time -f '%U %S %e' cmx detect --json --refresh
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARM_TARGET_S = 0.100


def cmx_executable() -> str:
    candidate = Path(sys.executable).parent / "cmx"
    return str(candidate) if candidate.exists() else "cmx"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return wall


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(samples), 4), "min_s": round(min(samples), 4),
            "max_s": round(max(samples), 4), "runs": len(samples)}


def bench_cold(runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="cmx-bench-detect-") as home:
            env = {**os.environ, "CMX_HOME": home}
            samples.append(timed([cmx_executable(), "detect", "--json"], env))
    return summary(samples)


def bench_warm(runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cmx-bench-detect-") as home:
        env = {**os.environ, "CMX_HOME": home}
        argv = [cmx_executable(), "run", "recipe", "--tags=detect,system"]
        timed(argv, env)  # fills the fact cache
        return summary([timed(argv, env) for _ in range(runs)])


def bench_detectors() -> dict[str, dict[str, float]]:
    """Each detector's probe time and fingerprint time, in this process (ms)."""
    from cmx_detect.detectors import SPECS
    from cmx_detect.source import LiveSource

    src = LiveSource()
    out = {}
    for spec in SPECS:
        t0 = time.perf_counter()
        spec.detect(src)
        t1 = time.perf_counter()
        spec.fingerprint(src)
        t2 = time.perf_counter()
        out[spec.name] = {"detect_ms": round((t1 - t0) * 1000, 2), "fingerprint_ms": round((t2 - t1) * 1000, 3)}
    return out


def bench_nvml_check(runs: int) -> dict[str, object]:
    """Where libnvidia-ml.so.1 is (None here without a driver), the cost of that check, and the
    cost of the NVML child interpreter the old probe always started (ms, median)."""
    from cmx_detect.nvml import NvmlCallError
    from cmx_detect.source import NVML_TIMEOUT_S, nvml_in_subprocess, nvml_library

    checks, children = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        found = nvml_library()
        checks.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        try:
            nvml_in_subprocess(NVML_TIMEOUT_S).close()
        except NvmlCallError:
            pass
        children.append(time.perf_counter() - t0)
    return {"library": found, "check_ms": round(statistics.median(checks) * 1000, 3),
            "child_ms": round(statistics.median(children) * 1000, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cold, warm, detectors = bench_cold(args.runs), bench_warm(args.runs), bench_detectors()
    nvml = bench_nvml_check(args.runs)
    if args.json:
        print(json.dumps({"cold_cmx_detect": cold, "warm_run_detect_system": warm,
                          "warm_target_s": WARM_TARGET_S, "detectors": detectors, "nvml_probe": nvml}, indent=2))
        return 0
    print(f"NVML loader check: {nvml['check_ms']} ms (libnvidia-ml.so.1: {nvml['library']}); "
          f"the child interpreter it spares: {nvml['child_ms']} ms")
    print(f"cold `cmx detect --json`:                    median {cold['median_s']:.3f} s  "
          f"min {cold['min_s']:.3f} s  ({cold['runs']} runs)")
    verdict = "within" if warm["median_s"] <= WARM_TARGET_S else "OVER"
    print(f"warm `cmx run recipe --tags=detect,system`:  median {warm['median_s']:.3f} s  min {warm['min_s']:.3f} s  "
          f"({warm['runs']} runs; {verdict} the {WARM_TARGET_S * 1000:.0f} ms target)")
    print("per detector (in-process): detect ms / fingerprint ms")
    for name, t in detectors.items():
        print(f"  {name:<18} {t['detect_ms']:>9.2f} / {t['fingerprint_ms']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
