"""The per-run cost of running an MLE-bench agent in the sandbox over running the same command bare.

Prepares the offline competition ``sklearn-digits`` in a temporary directory, then runs two
agent commands bare (``subprocess.run`` with the host paths) and through cmx-mlebench's
agent runner (``run_agent``: MLE-bench's paths, the public data read-only at ``/home/data``,
the validate helper, the agent's Python environment mounted read-only, no network, the
default limits), alternating A B A B ..., and prints min, median and max of each side and
the median of the per-pair differences:

* ``import``: ``python -c "import pandas, sklearn.neighbors"`` (start-up only);
* ``agent``: a small agent that reads ``train.csv``/``test.csv``, fits a 3-nearest-neighbour
  classifier and writes ``submission.csv``.

Usage::

    .venv/bin/python benchmarks/bench_mlebench.py [--runs 10] [--sandbox bubblewrap|docker]

``--sandbox docker`` measures the container backend where a plugin registers it (otherwise
it says so and exits 2). Needs ``bwrap`` for the default backend.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cmx_mlebench.agent import AgentSettings

AGENT = """
import sys
import pandas as pd
from sklearn.neighbors import KNeighborsClassifier
data, out = sys.argv[1], sys.argv[2]
train, test = pd.read_csv(f"{data}/train.csv"), pd.read_csv(f"{data}/test.csv")
features = [c for c in train.columns if c not in ("id", "target")]
model = KNeighborsClassifier(n_neighbors=3).fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict(test[features])}).to_csv(out, index=False)
"""


def _timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _summary(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{name:>9}: min {min(ms):8.1f} ms  median {statistics.median(ms):8.1f} ms  max {max(ms):8.1f} ms"


def _bare(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def _sandboxed(settings: AgentSettings, public: Path, work: Path) -> None:
    from cmx_mlebench.agent import run_agent

    result = run_agent(settings, "sklearn-digits", public, work).result
    if not result.ok:
        raise SystemExit(f"sandboxed {settings.argv} failed: {result.reason}: {result.text('stderr')[-500:]}")


def compare(runs: int, sandbox: str) -> None:
    from cmx_mlebench.agent import AgentSettings
    from cmx_mlebench.prepare import build

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        public = build("sklearn-digits", root / "prepared").competition.public_dir
        (root / "agent").mkdir()
        (root / "agent" / "agent.py").write_text(AGENT)
        commands = {
            "import": ([sys.executable, "-c", "import pandas, sklearn.neighbors"],
                       ["python", "-c", "import pandas, sklearn.neighbors"]),
            "agent": ([sys.executable, str(root / "agent" / "agent.py"), str(public), str(root / "bare.csv")],
                      ["python", "/home/agent/agent.py", "/home/data", "/home/submission/submission.csv"]),
        }
        for name, (bare_argv, inside_argv) in commands.items():
            settings = AgentSettings(tuple(inside_argv), time_limit_s=300, sandbox=sandbox, agent_dir=root / "agent")
            bare: list[float] = []
            boxed: list[float] = []
            for index in range(runs):
                work = root / f"{name}-{index}"
                work.mkdir()
                bare.append(_timed(partial(_bare, bare_argv)))
                boxed.append(_timed(partial(_sandboxed, settings, public, work)))
                shutil.rmtree(work, ignore_errors=True)
            pairs = [b - a for a, b in zip(bare, boxed, strict=True)]
            print(f"{name} ({runs} pairs, sandbox {sandbox}):")
            print(_summary("bare", bare))
            print(_summary("sandboxed", boxed))
            print(f"  per-run overhead (median of pair differences): {statistics.median(pairs) * 1000:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--sandbox", choices=("bubblewrap", "docker"), default="bubblewrap")
    args = parser.parse_args(argv)
    from cmx_core.api import CmxError, get_sandbox

    try:
        problem = get_sandbox(args.sandbox).available()
    except CmxError as exc:
        problem = str(exc)
    if problem:
        print(f"sandbox {args.sandbox} not usable here: {problem}", file=sys.stderr)
        return 2
    compare(args.runs, args.sandbox)
    return 0


if __name__ == "__main__":
    sys.exit(main())
