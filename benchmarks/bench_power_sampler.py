"""What the power sampler costs the test it measures.

1. One sampling round: the NVML backend answering from the H200 recording replay (the
   Python side of a round; the driver's own call time is not on this machine) and the RAPL
   backend reading a sysfs-shaped tree in a temporary directory.
2. The hot path: a GIL-bound loop (what a Python SUT's issue callbacks are) timed alone and
   with the sampler thread running at 100 ms and 10 ms, alternately, ``--repeat`` times.

    .venv/bin/python benchmarks/bench_power_sampler.py [--repeat 5] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cmx_core.telemetry.nvml import NvmlSource
from cmx_core.telemetry.rapl import RaplSource
from cmx_core.telemetry.reading import PowerSource
from cmx_core.telemetry.replay import NvmlRecordingReplay
from cmx_core.telemetry.sampler import PowerSampler

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "plugins" / "mlperf" / "tests" / "fixtures" / "power" / "h200-1x-session.json"
ROUNDS = 20_000


def _long_replay() -> NvmlRecordingReplay:
    """The H200 recording with each series repeated so it lasts ``ROUNDS`` rounds."""
    data: dict[str, Any] = json.loads(H200.read_text())
    data["series"] = {k: v * (ROUNDS // len(v) + 2) for k, v in data["series"].items()}
    return NvmlRecordingReplay(data)


def _rapl_tree(root: Path) -> Path:
    domain = root / "intel-rapl:0"
    domain.mkdir(parents=True)
    (domain / "name").write_text("package-0\n")
    (domain / "energy_uj").write_text("123456789\n")
    (domain / "max_energy_range_uj").write_text("262143328850\n")
    return root


def round_cost_us(source: PowerSource, rounds: int) -> float:
    began = time.perf_counter()
    for _ in range(rounds):
        source.read()
    return (time.perf_counter() - began) / rounds * 1e6


def busy_loop(seconds: float) -> float:
    """Iterations per second of a loop that holds the GIL (function calls and list appends)."""
    out: list[int] = []
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for i in range(1000):
            out.append(i)
        out.clear()
        n += 1000
    return n / seconds


def loop_with_sampler(source: PowerSource, period_s: float | None, seconds: float) -> tuple[float, int]:
    if period_s is None:
        return busy_loop(seconds), 0
    sampler = PowerSampler(source, period_s)
    sampler.start()
    rate = busy_loop(seconds)
    return rate, len(sampler.stop().rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rapl = RaplSource(_rapl_tree(Path(tmp)))
        nvml = NvmlSource(_long_replay())
        for label, source in (("NVML replay (1 GPU, 4 calls)", nvml), ("RAPL sysfs tree (1 domain)", rapl)):
            cost = round_cost_us(source, ROUNDS // 2)
            print(f"one round, {label:29s} {cost:8.1f} us = {cost * 10 / 1e4:.3f} % of a core at 100 ms")
        periods: dict[str, float | None] = {"no sampler": None, "100 ms": 0.1, "10 ms": 0.01}
        rates: dict[str, list[float]] = {k: [] for k in periods}
        rounds: dict[str, list[int]] = {k: [] for k in periods}
        for _ in range(args.repeat):
            for name, period in periods.items():  # alternate, so drift hits every setting alike
                rate, n = loop_with_sampler(rapl, period, args.seconds)
                rates[name].append(rate)
                rounds[name].append(n)
    base = statistics.median(rates["no sampler"])
    spread = (max(rates["no sampler"]) - min(rates["no sampler"])) / base * 100
    print(f"\nGIL-bound loop, {args.repeat} x {args.seconds:g} s each (median iterations/s; "
          f"the no-sampler runs alone spread {spread:.0f} %, the noise floor of this machine):")
    for name in periods:
        median = statistics.median(rates[name])
        print(f"  {name:10s} {median:14,.0f}/s  {median / base * 100:6.1f} % of no sampler"
              f"  rounds/run {statistics.median(rounds[name]):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
