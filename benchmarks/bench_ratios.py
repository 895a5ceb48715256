"""The engine's speed as ratios, each pair measured alternately in one run (A B A B ...), so
a machine whose speed drifts affects both sides alike:

* warm cached ``cmx run recipe --tags=detect,os`` against CM's warm
  ``cm run script --tags=detect,os`` (target: at most 0.5 x);
* ``cmx --help`` against ``python -c pass`` (target: at most 2 x).

    .venv/bin/python benchmarks/bench_ratios.py [--repeat 21] [--cm PATH/TO/cm] [--check]

CM is not a dependency (its ``cmind`` distribution installs a console script named
``cmx``): give ``--cm`` the ``cm`` of a separate virtual environment holding ``cmind`` and
``cmx4mlops`` (whose wheel carries CM's scripts, so nothing is downloaded), e.g.
``python3 -m venv /tmp/cm && /tmp/cm/bin/pip install cmind cmx4mlops``. Without it only the
``--help`` ratio is measured. Everything runs in private homes under a temporary directory.
Prints medians (ms) and the median of the per-pair ratios; ``--check`` exits 1 when a
target is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CMX = Path(sys.executable).with_name("cmx")


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   stdin=subprocess.DEVNULL, check=True, timeout=120)
    return (time.perf_counter() - start) * 1000


def alternate(a: list[str], a_env: dict[str, str], b: list[str], b_env: dict[str, str], cwd: str,
              repeat: int) -> tuple[float, float, float]:
    """(median ms of A, median ms of B, median of the per-pair A/B ratios), after a warm-up."""
    timed(a, a_env, cwd)
    timed(b, b_env, cwd)
    pairs = [(timed(a, a_env, cwd), timed(b, b_env, cwd)) for _ in range(repeat)]
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
            statistics.median(p[0] / p[1] for p in pairs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--cm", help="the cm executable of a separate venv with cmind and cmx4mlops")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    rows: list[tuple[str, float, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="cmx-ratios-") as tmp:
        env = {**os.environ, "CMX_HOME": f"{tmp}/cmx"}
        env.pop("CMX_NO_REPLAY", None)
        cmx_run = [str(CMX), "run", "recipe", "--tags=detect,os"]
        for _ in range(2):  # fill the cache, then write the warm-run memo
            subprocess.run(cmx_run, env=env, cwd=tmp, capture_output=True, check=True, timeout=300)
        if args.cm:
            cm_env = {**os.environ, "HOME": f"{tmp}/cm", "CM_REPOS": f"{tmp}/cm/repos"}
            cm_run = [args.cm, "run", "script", "--tags=detect,os", "--quiet"]
            subprocess.run(cm_run, env=cm_env, cwd=tmp, capture_output=True, check=True, timeout=300)  # its index
            rows.append(("warm detect,os: cmx vs cm", *alternate(cmx_run, env, cm_run, cm_env, tmp, args.repeat), 0.5))
        help_cmd, bare = [str(CMX), "--help"], [sys.executable, "-c", "pass"]
        rows.append(("cmx --help vs python -c pass", *alternate(help_cmd, env, bare, env, tmp, args.repeat), 2.0))
    print(f"{'pair (A vs B)':<32}{'A ms':>9}{'B ms':>9}{'A/B':>8}  target")
    missed = False
    for name, a_ms, b_ms, ratio, target in rows:
        ok = ratio <= target
        missed |= not ok
        print(f"{name:<32}{a_ms:>9.1f}{b_ms:>9.1f}{ratio:>8.3f}  <= {target:g} {'ok' if ok else 'MISSED'}")
    if not args.cm:
        print("(no --cm given: the CM ratio was not measured)")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
