"""Does the run sampler change the main job's tokens/s? Measured inside one long run, in
alternated windows, so that the machine's drift between whole runs (about ±8 % a pair on the
2-core box: docs/telemetry.md) cancels out:

    .venv/bin/python benchmarks/bench_telemetry_windows.py [--pairs 40] [--window 5] [--pin 0] [--json]

The main job is the quick start's LLM workload without LoadGen around it: a child process
loads the tiny Llama (built by ``get-tiny-llama`` into a private ``CMX_HOME``, or ``--home``)
with cmx-mlperf's own generator and settings (greedy, 32 new tokens, batches of 8, one torch
thread, float32) and generates over the built-in prompts without a pause, stamping every
token with the system's monotonic clock. This process is cmx's side of a run: it holds the
sampler (:class:`~cmx_core.telemetry.collector.RunTelemetry` at 1 Hz over its process tree,
the child included, as ``cmx run`` samples a step), switched on and off in windows of
``--window`` seconds in ABBA order (on, off, off, on, ...). Each window's tokens/s is the
count of token stamps inside it; a pair's change is its on window against its off window.
An on window also pays the sampler's start (probes opened, first round) and stop (the
series and summary written), so the figure is an upper bound on a steady sampler's cost.

``--pin CPU`` runs both processes on that one CPU (the worst case: the sampler can only take
the job's own core); by default they share the machine as a run does. Prints the median
change, its bootstrap 95 % interval, and each arm's median tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from bisect import bisect_left
from pathlib import Path
from typing import Any

from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings

JOB = """
import sys, time
from array import array
from bisect import bisect_left
from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.generate import GenerationSettings, LlamaGenerator

model_dir, out = sys.argv[1], sys.argv[2]
generator = LlamaGenerator(model_dir, GenerationSettings(32, 2, "cpu", "float32", 1))
prompts = [generator.encode(s.prompt) for s in SAMPLES]
stamps = array("d")
clock = time.monotonic

def on_token(row, token):
    stamps.append(clock())

generator.generate(prompts[:8], on_token)  # first calls allocate
del stamps[:]
print("ready", flush=True)
deadline = float(sys.stdin.readline())  # the end of the sampler's schedule (monotonic clock)
index = 0
while clock() < deadline:
    generator.generate([prompts[(index + k) % len(prompts)] for k in range(8)], on_token)
    index += 8
with open(out, "wb") as f:
    stamps.tofile(f)
"""


def tiny_llama(home: Path) -> str:
    """The tiny Llama's directory, built (or found in the cache) by ``get-tiny-llama``."""
    argv = [sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=get,model,llama,tiny", "--json", "-q"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "CMX_HOME": str(home)})
    if done.returncode != 0:
        raise SystemExit(f"bench_telemetry_windows: get-tiny-llama failed: {done.stderr.strip()[-500:]}")
    return str(json.loads(done.stdout)["outputs"]["path"])


def windows(pairs: int, window_s: float, start: float) -> list[tuple[int, bool, float, float]]:
    """(pair, sampler on, start, end) in ABBA order from ``start``."""
    out = []
    for pair in range(pairs):
        first = pair % 2 == 0
        for k, on in enumerate((first, not first)):
            begin = start + (2 * pair + k) * window_s
            out.append((pair, on, begin, begin + window_s))
    return out


def sampled_windows(schedule: list[tuple[int, bool, float, float]], run_dir: Path, flag: Path | None = None) -> None:
    """Hold the sampler on for each on window of the schedule (off in the others); ``flag``, a
    file that exists only in the on windows (what else the job switches on with them)."""
    for pair, on, begin, end in schedule:
        time.sleep(max(0.0, begin - time.monotonic()))
        if not on:
            continue
        telemetry = RunTelemetry(f"bench-{pair}", run_dir / f"pair-{pair}", TelemetrySettings(interval_s=1.0))
        (run_dir / f"pair-{pair}").mkdir(parents=True, exist_ok=True)
        telemetry.start()
        if flag is not None:
            flag.touch()
        time.sleep(max(0.0, end - time.monotonic()))
        if flag is not None:
            flag.unlink()
        telemetry.stop()


def rates(stamps: array[float], schedule: list[tuple[int, bool, float, float]]) -> dict[int, dict[bool, float]]:
    """Tokens/s of each window, by pair and arm."""
    ordered = sorted(stamps)
    by_pair: dict[int, dict[bool, float]] = {}
    for pair, on, begin, end in schedule:
        count = _count_between(ordered, begin, end)
        by_pair.setdefault(pair, {})[on] = count / (end - begin)
    return by_pair


def _count_between(ordered: list[float], begin: float, end: float) -> int:
    return bisect_left(ordered, end) - bisect_left(ordered, begin)


def bootstrap_median(values: list[float], rounds: int = 4000, seed: int = 1) -> tuple[float, float]:
    """A 95 % percentile-bootstrap interval of the median."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def measure(model_dir: str, pairs: int, window_s: float, pin: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cmx-bench-windows-") as tmp:
        out = Path(tmp) / "stamps.bin"
        if pin is not None:
            os.sched_setaffinity(0, {pin})
        child = subprocess.Popen([sys.executable, "-c", JOB, model_dir, str(out)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdin is not None
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("bench_telemetry_windows: the job did not start")
        schedule = windows(pairs, window_s, time.monotonic() + 2.0)
        child.stdin.write(f"{schedule[-1][3] + 0.5}\n")  # the job runs a little past the last window
        child.stdin.close()
        sampled_windows(schedule, Path(tmp))
        if child.wait(timeout=120) != 0:
            raise SystemExit(f"bench_telemetry_windows: the job failed (exit {child.returncode})")
        stamps: array[float] = array("d")
        stamps.frombytes(out.read_bytes())
    by_pair = rates(stamps, schedule)
    changes = [100 * (p[True] - p[False]) / p[False] for p in by_pair.values()]
    low, high = bootstrap_median(changes)
    on = [p[True] for p in by_pair.values()]
    off = [p[False] for p in by_pair.values()]
    return {"pairs": pairs, "window_s": window_s, "pinned_cpu": pin, "tokens": len(stamps),
            "tokens_per_s_on_median": round(statistics.median(on), 2),
            "tokens_per_s_off_median": round(statistics.median(off), 2),
            "median_change_pct": round(statistics.median(changes), 3),
            "median_change_95ci_pct": [round(low, 3), round(high, 3)],
            "pair_change_pct": [round(c, 3) for c in changes],
            "spread_off_pct": round(100 * (max(off) - min(off)) / statistics.median(off), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=40, help="on/off window pairs")
    parser.add_argument("--window", type=float, default=5.0, help="seconds a window")
    parser.add_argument("--pin", type=int, default=None, metavar="CPU", help="run job and sampler on this CPU only")
    parser.add_argument("--home", type=Path, default=None, help="CMX_HOME with (or for) the tiny Llama")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    if args.pairs < 2 or args.window < 1:
        parser.error("--pairs must be at least 2 and --window at least 1 s")
    with tempfile.TemporaryDirectory(prefix="cmx-bench-llm-") as tmp:
        model_dir = tiny_llama(args.home or Path(tmp))
        report = measure(model_dir, args.pairs, args.window, args.pin)
    if args.json:
        print(json.dumps(report))
    else:
        low, high = report["median_change_95ci_pct"]
        print(f"main job, {report['pairs']} pairs of {report['window_s']:g} s windows"
              f"{'' if args.pin is None else f' on CPU {args.pin}'}: {report['tokens_per_s_on_median']:.1f} "
              f"tokens/s sampled vs {report['tokens_per_s_off_median']:.1f} not; median change "
              f"{report['median_change_pct']:+.2f} % (95 % interval {low:+.2f} .. {high:+.2f} %); the unsampled "
              f"windows alone spread {report['spread_off_pct']:.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
