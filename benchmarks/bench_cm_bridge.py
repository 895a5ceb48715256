"""Warm runs of an imported CM script through cmx against CM's own ``cm run script``.

Imports the cmx4mlops collection from a CM virtual environment (``--cm-venv``, made with
``pip install cmind==4.2.0 cmx4mlops==1.0.1``; never the cmx environment, since cmind's
``cmx`` console script would shadow ours) into a private ``CMX_HOME``, warms both sides
once (cmx fills its cache, CM builds its index and cache), then hands the two whole-process
commands to the workplace's ``farm-bench``, which runs them alternately (A B A B ...) and
prints min/median/max of each and the pair-by-pair ratio A/B:

    A: cmx run recipe --tags=cm,detect,os --recipes OUT --json   (served from cmx's cache)
    B: cm run script --tags=detect,os --quiet                    (CM never caches detect-os)

Usage::

    .venv/bin/python benchmarks/bench_cm_bridge.py --cm-venv /tmp/cmx-cm-cmind-4.2.0 [--runs 10] \\
        [--tags detect,os]

The ratio printed by farm-bench (A/B, median) is the figure to quote.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _collection(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/cmx4mlops/repo/script"))
    if not found:
        raise SystemExit(f"{venv}: no cmx4mlops scripts; pip install cmind==4.2.0 cmx4mlops==1.0.1 into it")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cm-venv", type=Path, required=True, help="virtual environment holding cmind and cmx4mlops")
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command (farm-bench -n)")
    parser.add_argument("--tags", default="detect,os", help="CM tags of the script (cmx gets cm,<tags>)")
    args = parser.parse_args()
    cmx = shutil.which("cmx", path=str(Path(sys.executable).parent)) or "cmx"
    cm = args.cm_venv / "bin" / "cm"
    work = Path(tempfile.mkdtemp(prefix="bench-cm-bridge-"))
    home, out, repos = work / "cmx-home", work / "recipes", work / "cm-repos"
    env = {**os.environ, "CMX_HOME": str(home), "CM_REPOS": str(repos)}
    subprocess.run([cmx, "import", "cm", str(_collection(args.cm_venv)), "--out", str(out), "--json"],
                   env=env, check=True, stdout=subprocess.DEVNULL, cwd=work)
    a = [cmx, "run", "recipe", f"--tags=cm,{args.tags}", "--recipes", str(out), "--json"]
    b = [str(cm), "run", "script", f"--tags={args.tags}", "--quiet"]
    for warm in (a, a, b):  # cmx: fill the cache, then the replay memo; CM: its index
        subprocess.run(warm, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
    print(f"A (cmx, warm cached): {shlex.join(a)}\nB (CM, warm):        {shlex.join(b)}", flush=True)
    bench = ["farm-bench", "-n", str(args.runs), "--timeout", "900", "--vs",
             shlex.join(["env", f"CM_REPOS={repos}", *b]), "--", "env", f"CMX_HOME={home}", *a]
    done = subprocess.run(bench, cwd=work, check=False)
    shutil.rmtree(work, ignore_errors=True)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
