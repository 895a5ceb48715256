"""Like-for-like runs of an imported CM script through cmx against CM's own ``cm run script``.

Imports the cmx4mlops collection from a CM virtual environment (``--cm-venv``, made with
``pip install cmind==4.2.0 cmx4mlops==1.0.1``; never the cmx environment, since cmind's
``cmx`` console script would shadow ours) twice: as CM caches (a detect script without
``cache: true`` re-runs every time, the bridge's default) and with ``--cache-detections 1d``.
Then, alternating A B A B ... (so load on a shared machine hits both alike), each side through
CM's own command line (``cm run script --tags=TAGS``, ``cmx cm run script --tags=TAGS``), it
times four pairs of whole-process commands and prints each side's median wall time (with
``--cpu``, the CPU seconds of its process tree) and the median of the pair ratios A/B:

* ``warm, as CM``: cmx (recipes as CM caches, cmx's home warm) vs CM (index built, cache warm);
* ``warm, cached``: cmx serving the detection from its cache vs the same CM command;
* ``cold, as CM``: a fresh cmx home for each run vs a fresh ``CM_REPOS`` for each run
  (CM rebuilds its index, cmx its catalog and facts);
* ``cold, cached``: the same, with the cached-detections recipes (the first run fills the cache).

Usage::

    .venv/bin/python benchmarks/bench_cm_bridge.py --cm-venv /tmp/cmx-cm-cmind-4.2.0 [--runs 5] \\
        [--tags detect,os] [--cpu]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TIMEOUT_S = 900


def _collection(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/cmx4mlops/repo/script"))
    if not found:
        raise SystemExit(f"{venv}: no cmx4mlops scripts; pip install cmind==4.2.0 cmx4mlops==1.0.1 into it")
    return found[0]


CPU = {"value": False}
"""``--cpu``: time the CPU seconds of each command's process tree (its reaped children's
user + system time) instead of its wall time."""


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=TIMEOUT_S)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - start
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu if CPU["value"] else wall


def _pairs(runs: int, a: Callable[[int], float], b: Callable[[int], float]) -> tuple[float, float, float]:
    ta, tb = [], []
    for i in range(runs):
        ta.append(a(i))
        tb.append(b(i))
    return statistics.median(ta), statistics.median(tb), statistics.median(x / y for x, y in zip(ta, tb, strict=True))


def _sides(temperature: str, a_cmd: list[str], b_cmd: list[str], env: dict[str, str],
           fresh: Callable[[str, int, str], dict[str, str]], mode: str,
           work: Path) -> tuple[Callable[[int], float], Callable[[int], float]]:
    """The two timed commands of a pair: warm in the shared homes, cold in fresh ones."""
    def a(i: int) -> float:
        return _timed(a_cmd, env if temperature == "warm" else fresh("CMX_HOME", i, mode), work)

    def b(i: int) -> float:
        return _timed(b_cmd, env if temperature == "warm" else fresh("CM_REPOS", i, mode), work)

    return a, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cm-venv", type=Path, required=True, help="virtual environment holding cmind and cmx4mlops")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command")
    parser.add_argument("--tags", default="detect,os",
                        help="CM tags of the script, given to both as CM's own command line (cmx cm run script)")
    parser.add_argument("--cpu", action="store_true", help="CPU seconds of each process tree instead of wall time")
    args = parser.parse_args()
    CPU["value"] = args.cpu
    cmx = shutil.which("cmx", path=str(Path(sys.executable).parent)) or "cmx"
    cm = str(args.cm_venv / "bin" / "cm")
    work = Path(tempfile.mkdtemp(prefix="bench-cm-bridge-"))
    home, repos = work / "cmx-home", work / "cm-repos"
    env = {**os.environ, "CMX_HOME": str(home), "CM_REPOS": str(repos)}
    recipes = {"as CM": work / "recipes", "cached": work / "recipes-cached"}
    for extra, out in (([], recipes["as CM"]), (["--cache-detections", "1d"], recipes["cached"])):
        subprocess.run([cmx, "import", "cm", str(_collection(args.cm_venv)), "--out", str(out), "--json", *extra],
                       env=env, check=True, stdout=subprocess.DEVNULL, cwd=work, timeout=TIMEOUT_S)

    def cmx_cmd(mode: str) -> list[str]:
        return [cmx, "cm", "run", "script", f"--tags={args.tags}", "--recipes", str(recipes[mode]), "--json"]

    cm_cmd = [cm, "run", "script", f"--tags={args.tags}", "--quiet"]
    for warm in (cmx_cmd("as CM"), cmx_cmd("cached"), cmx_cmd("cached"), cm_cmd):
        subprocess.run(warm, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
                       timeout=TIMEOUT_S)

    def fresh(key: str, i: int, mode: str) -> dict[str, str]:
        return {**env, key: str(work / f"cold-{mode.replace(' ', '-')}-{key}-{i}")}

    what = "CPU s" if args.cpu else "s"
    print(f"{'pair':<14} {'cmx median ' + what:>17} {'CM median ' + what:>16} {'median A/B':>11}")
    for mode in ("as CM", "cached"):
        for temperature in ("warm", "cold"):
            a, b = _sides(temperature, cmx_cmd(mode), cm_cmd, env, fresh, mode, work)
            ma, mb, ratio = _pairs(args.runs, a, b)
            print(f"{temperature + ', ' + mode:<14} {ma:>17.3f} {mb:>16.3f} {ratio:>11.2f}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
