"""How well ``cmx results predict`` (#51) predicts runs it never saw, on a real grid this
machine runs in a few minutes: the demo sort's ``size`` (24 sizes, 2,000 to 400,000 items,
log-spaced) times its sorting algorithm (``builtin``, ``heap``), 48 recorded runs of
``items_per_second`` (best of ``--repeats``).

Each split (seeded) holds out a quarter of the grid, fits the model on the rest (the same
code ``cmx results predict`` runs) and counts the held-out runs whose measured value lies
inside the predicted 90 % interval (the issue's target: at least 80 %), with the median
error of the prediction and the median width of the interval.

    .venv/bin/python benchmarks/bench_predict.py [--splits 10] [--repeats 3] [--store DIR]

``--store DIR`` keeps (or reuses) the runs in DIR's cmx home, so a second look at other
splits does not measure again. Prints one line per split and a summary; nothing is timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CMX = Path(sys.executable).with_name("cmx")
SIZES = tuple(sorted({round(2000 * (200 ** (i / 23))) for i in range(24)}))
ALGOS = ("builtin", "heap")


def measure(home: Path, repeats: int) -> None:
    """Every point of the grid not yet in ``home``'s store, as an ordinary recorded run."""
    env = {**os.environ, "CMX_HOME": str(home)}
    done = home / "bench-predict-done.json"
    have = set(json.loads(done.read_text())) if done.exists() else set()
    for index, (size, algo) in enumerate((s, a) for s in SIZES for a in ALGOS):
        key = f"{size}-{algo}"
        if key in have:
            continue
        tags = "demo,sort" + (",heap" if algo == "heap" else "")
        subprocess.run([str(CMX), "run", "recipe", f"--tags={tags}", f"--size={size}", f"--repeats={repeats}",
                        "--json", "-q"], env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                       timeout=600)
        have.add(key)
        done.write_text(json.dumps(sorted(have)))
        print(f"measured {index + 1}/{len(SIZES) * len(ALGOS)}: size={size} {algo}", file=sys.stderr, flush=True)


def split(home: Path, seed: int) -> tuple[float, float, float]:
    """Coverage of the 90 % interval on the held-out quarter, median |log error|, median
    relative width of the interval."""
    os.environ["CMX_HOME"] = str(home)
    from cmx_core import paths
    from cmx_core.results.learning_set import LearningQuery, learning_set
    from cmx_core.results.predict import Model
    from cmx_core.results.store import ResultStore

    data = learning_set(ResultStore(paths.results_db()), LearningQuery("demo-sort", "items_per_second"))
    grid = list(data.observations)
    rng = random.Random(seed)
    held = set(rng.sample(range(len(grid)), len(grid) // 4))
    train = tuple(o for i, o in enumerate(grid) if i not in held)
    model = Model(dataclasses.replace(data, observations=train))
    tests = [o for i, o in enumerate(grid) if i in held]
    predictions = model.predict([{a: o.config[a] for a in model.data.axes} for o in tests])
    inside = sum(p.low <= o.value <= p.high for p, o in zip(predictions, tests, strict=True))
    errors = [abs(math.log(p.value / o.value)) for p, o in zip(predictions, tests, strict=True)]
    widths = [(p.high - p.low) / p.value for p in predictions]
    return inside / len(tests), statistics.median(errors), statistics.median(widths)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store", type=Path, default=None, help="a cmx home to keep the runs in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home = (args.store or Path(scratch)).absolute()
        measure(home, args.repeats)
        print(f"grid: {len(SIZES)} sizes x {len(ALGOS)} algorithms = {len(SIZES) * len(ALGOS)} runs of demo-sort; "
              f"{len(SIZES) * len(ALGOS) // 4} held out per split")
        results = []
        for seed in range(args.splits):
            coverage, error, width = split(home, seed)
            results.append((coverage, error, width))
            print(f"split {seed}: {coverage:.0%} inside the 90% interval, median error {error:.1%}, "
                  f"median interval width {width:.1%}")
        covers = [r[0] for r in results]
        print(f"coverage: median {statistics.median(covers):.0%}, min {min(covers):.0%} over {len(results)} splits "
              f"(target: at least 80%); median error {statistics.median(r[1] for r in results):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
