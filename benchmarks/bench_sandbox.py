"""The per-run cost of the bubblewrap sandbox over running the same command bare.

For each command (``/usr/bin/true``, ``python3 -c pass`` and a ~0.2 s Python loop), runs it
bare (``subprocess.run``) and sandboxed (``BubblewrapSandbox().run`` with the default
limits: memory and process cgroups, rlimits, no network, a private work dir) in turn,
A B A B ..., and prints min, median and max of each and the median of the per-pair
differences. The difference is the same for the three commands: the sandbox costs a fixed
amount per run (namespaces, mounts, cgroups, the PID namespace's teardown), not a share of
the program's own time. Usage::

    .venv/bin/python benchmarks/bench_sandbox.py [--runs 30]

For a whole-process figure (interpreter start-up included, the same in both), time
``--one sandbox`` against ``--one bare`` with any external timer (``/usr/bin/time -v``, or
``hyperfine``), e.g. ``--one sandbox --command true --runs 20``; the per-run cost is the
difference divided by ``--runs``. Needs ``bwrap`` (``apt-get install bubblewrap``); as root
the cgroup limits are used, otherwise rlimits.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from cmx_core.sandbox import Limits, SandboxSpec
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox

PY = "/usr/bin/python3"
COMMANDS = {
    "true": ["/usr/bin/true"],
    "python": [PY, "-c", "pass"],
    "loop": [PY, "-c", "sum(range(4 * 10**6))"],
}


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _runners(argv: list[str], work: str) -> tuple[Callable[[], object], Callable[[], object]]:
    box = BubblewrapSandbox()
    spec = SandboxSpec(argv=argv, work_dir=work, limits=Limits(wall_s=60))

    def bare() -> object:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True, cwd=work)

    def boxed() -> object:
        result = box.run(spec)
        if not result.ok:
            raise SystemExit(f"sandboxed {argv} did not run: {result.reason}")
        return result

    return bare, boxed


def _row(label: str, values: list[float]) -> str:
    return f"  {label:<10} min {min(values):7.1f}  median {statistics.median(values):7.1f}  max {max(values):7.1f} ms"


def compare(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="cmx-bench-sandbox-") as work:
        for name, argv in COMMANDS.items():
            bare, boxed = _runners(argv, work)
            bare(), boxed()  # warm the page cache and the imports
            pairs = [(_timed(bare), _timed(boxed)) for _ in range(runs)]
            plain, sandboxed = [a for a, _ in pairs], [b for _, b in pairs]
            extra = statistics.median(b - a for a, b in pairs)
            print(f"{name}: {' '.join(argv)}  ({runs} pairs)")
            print(_row("bare", plain))
            print(_row("sandboxed", sandboxed))
            print(f"  overhead   median {extra:7.1f} ms per run")


def one(mode: str, command: str, runs: int) -> None:
    """``runs`` runs of one command, bare or sandboxed, for an external whole-process timer."""
    with tempfile.TemporaryDirectory(prefix="cmx-bench-sandbox-") as work:
        bare, boxed = _runners(COMMANDS[command], work)
        run = boxed if mode == "sandbox" else bare
        for _ in range(runs):
            run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--one", choices=("bare", "sandbox"), help="only run one side, --runs times")
    parser.add_argument("--command", choices=sorted(COMMANDS), default="true")
    args = parser.parse_args(argv)
    problem = BubblewrapSandbox().available()
    if problem:
        print(f"bubblewrap sandbox not usable here: {problem}", file=sys.stderr)
        return 2
    if args.one:
        one(args.one, args.command, args.runs)
    else:
        compare(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
