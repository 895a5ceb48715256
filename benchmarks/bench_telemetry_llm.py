"""Does the run sampler change the main job's tokens/s? Alternated real runs of the quick
start's main job (the LLM SUT's measured LoadGen step, scripts/benchmark.sh) with telemetry on
and off (docs/telemetry.md, "What it costs"):

    .venv/bin/python benchmarks/bench_telemetry_llm.py [--pairs 5] [--duration 8] [--scenario Offline] [--json]

One warm-up run first (it builds the tiny Llama into a private ``CMX_HOME``, or uses
``--home``) is not counted. Then ``--pairs`` pairs in ABBA order (on, off, off, on, ...: a slow
drift of a busy machine cancels), each a ``cmx run ... --json`` of its own: its
``tokens_per_second`` is LoadGen's, from the run's result. It prints every run's tokens/s, each
pair's change (sampled against unsampled, in %), their median and range, and the spread of the
unsampled runs alone: on a shared machine that spread is the noise any change is judged against.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TAGS = "--tags=mlperf,inference,llama"


@dataclass(frozen=True)
class Run:
    pair: int
    telemetry: bool
    tokens_per_s: float
    status: str


def abba(pairs: int) -> list[tuple[int, bool]]:
    """(pair, telemetry on) in the order on, off, off, on, on, off, ..."""
    order = []
    for pair in range(pairs):
        first = pair % 2 == 0
        order += [(pair, first), (pair, not first)]
    return order


def run_once(home: Path, telemetry: bool, scenario: str, duration_s: float) -> tuple[float, str]:
    argv = [sys.executable, "-m", "cmx_core", "run", "recipe", TAGS, f"--scenario={scenario}",
            f"--duration_s={duration_s:g}", "--json", "-q", *(() if telemetry else ("--no-telemetry",))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "CMX_HOME": str(home)})
    if done.returncode != 0:
        raise SystemExit(f"bench_telemetry_llm: the main job failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-500:]}")
    document = json.loads(done.stdout)
    return float(document["metrics"]["tokens_per_second"]["value"]), str(document["status"])


def summary(runs: list[Run]) -> dict[str, Any]:
    """Each pair's change in %, their median and range; the unsampled runs' spread in %."""
    by_pair: dict[int, dict[bool, float]] = {}
    for run in runs:
        by_pair.setdefault(run.pair, {})[run.telemetry] = run.tokens_per_s
    changes = [100 * (p[True] - p[False]) / p[False] for p in by_pair.values() if True in p and False in p]
    off = [r.tokens_per_s for r in runs if not r.telemetry]
    on = [r.tokens_per_s for r in runs if r.telemetry]
    return {
        "pairs": len(changes),
        "tokens_per_s_on_median": round(statistics.median(on), 2),
        "tokens_per_s_off_median": round(statistics.median(off), 2),
        "pair_change_pct": [round(c, 3) for c in changes],
        "median_change_pct": round(statistics.median(changes), 3),
        "change_range_pct": [round(min(changes), 3), round(max(changes), 3)],
        "spread_off_pct": round(100 * (max(off) - min(off)) / statistics.median(off), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="on/off pairs of the main job")
    parser.add_argument("--duration", type=float, default=8.0, help="LoadGen min_duration of each run, seconds")
    parser.add_argument("--scenario", default="Offline", choices=["Offline", "Server", "SingleStream"])
    parser.add_argument("--home", type=Path, default=None, help="CMX_HOME to run in (default: a fresh one)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cmx-bench-llm-") as tmp:
        home = args.home or Path(tmp)
        print("warm-up run (builds the tiny Llama, not counted)", file=sys.stderr, flush=True)
        run_once(home, True, args.scenario, args.duration)
        runs = []
        for pair, telemetry in abba(args.pairs):
            tokens, status = run_once(home, telemetry, args.scenario, args.duration)
            runs.append(Run(pair, telemetry, tokens, status))
            print(f"pair {pair + 1}: telemetry {'on ' if telemetry else 'off'} {tokens:9.2f} tokens/s ({status})",
                  file=sys.stderr, flush=True)
    report = {"scenario": args.scenario, "duration_s": args.duration, "runs": [asdict(r) for r in runs],
              **summary(runs)}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"main job ({args.scenario}, {args.duration:g} s): {report['tokens_per_s_on_median']:.1f} tokens/s "
              f"sampled vs {report['tokens_per_s_off_median']:.1f} not; per pair {report['pair_change_pct']} %, "
              f"median {report['median_change_pct']:+.2f} % (range {report['change_range_pct'][0]:+.2f} .. "
              f"{report['change_range_pct'][1]:+.2f} %); the unsampled runs alone spread "
              f"{report['spread_off_pct']:.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
