"""The per-run cost of each sandbox over running the same command bare.

For each command (``/usr/bin/true``, ``python3 -c pass`` and a ~0.2 s Python loop), runs it
bare (``subprocess.run``), in a bubblewrap sandbox of its own (``BubblewrapSandbox().run``
with the default limits: memory and process cgroups, rlimits, no network, a private work
dir), as one run of a bubblewrap session (``BubblewrapSession.run``: the sandbox already
up, the run's own limits and verdict) and in a container of the docker sandbox
(``get_sandbox("docker")``, where cmx-docker is installed and an engine answers), in turn,
A B C D A B C D ..., and prints min, median and max of each and the median of the
per-round differences from bare. The difference hardly depends on the command: a sandbox
costs a fixed amount per run (namespaces, mounts, cgroups, the PID namespace's teardown;
for docker the container's creation, start and removal), not a share of the program's own
time. Usage::

    .venv/bin/python benchmarks/bench_sandbox.py [--runs 30] [--no-docker]

The docker image is ``CMX_SANDBOX_IMAGE`` or cmx-docker's ``python`` image (built once).
For a whole-process figure (interpreter start-up included, the same in all), time
``--one sandbox`` (or ``session``, ``docker``) against ``--one bare`` with an external timer
(``/usr/bin/time -v``, the two commands alternated A B A B), e.g. ``--one sandbox --command
true --runs 20``; the per-run cost is the difference divided by ``--runs``. Needs ``bwrap``
(``apt-get install bubblewrap``); as root the cgroup limits are used, otherwise rlimits (and no session).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import Any

from cmx_core.api import UsageError, get_sandbox
from cmx_core.sandbox import Limits, Sandbox, SandboxSpec
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox
from cmx_core.sandbox.session import BubblewrapSession, session_unavailable

Runner = Callable[[], object]

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


def _boxed(box: Sandbox | BubblewrapSession, spec: SandboxSpec) -> Callable[[], object]:
    def run() -> object:
        result = box.run(spec)
        if not result.ok:
            raise SystemExit(f"{box.__class__.__name__}: {list(spec.argv)} did not run: {result.reason}")
        return result

    return run


def _runners(argv: list[str], work: str, extra: Mapping[str, Sandbox | BubblewrapSession]) -> dict[str, Runner]:
    """bare, then each way to sandbox ``argv``: the name and a call that runs it once."""
    spec = SandboxSpec(argv=argv, work_dir=work, limits=Limits(wall_s=60))

    def bare() -> object:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True, cwd=work)

    ways: dict[str, Runner] = {"bare": bare, "sandbox": _boxed(BubblewrapSandbox(), spec)}
    ways.update({name: _boxed(box, spec) for name, box in extra.items()})
    return ways


def _docker() -> tuple[Sandbox | None, str]:
    """The docker sandbox with its image (``CMX_SANDBOX_IMAGE``, else cmx-docker's python
    image, built once), or None and why not."""
    try:
        box = get_sandbox("docker")
    except UsageError as exc:
        return None, str(exc)
    why = box.available()
    if why:
        return None, why
    if not os.environ.get("CMX_SANDBOX_IMAGE"):
        build: Any = importlib.import_module("cmx_docker.build")
        os.environ["CMX_SANDBOX_IMAGE"] = build.ensure_image("python").tag
    return get_sandbox("docker"), ""


def _row(label: str, values: list[float]) -> str:
    return f"  {label:<10} min {min(values):7.1f}  median {statistics.median(values):7.1f}  max {max(values):7.1f} ms"


def _extra(work: str, docker: Sandbox | None, stack: ExitStack) -> dict[str, Sandbox | BubblewrapSession]:
    extra: dict[str, Sandbox | BubblewrapSession] = {}
    if session_unavailable() is None:
        extra["session"] = stack.enter_context(BubblewrapSession(work))
    if docker is not None:
        extra["docker"] = docker
    return extra


def compare(runs: int, docker: Sandbox | None) -> None:
    with tempfile.TemporaryDirectory(prefix="cmx-bench-sandbox-") as work, ExitStack() as stack:
        extra = _extra(work, docker, stack)
        for name, argv in COMMANDS.items():
            ways = _runners(argv, work, extra)
            for way in ways.values():  # warm the page cache, the imports, the image
                way()
            rounds = [{label: _timed(way) for label, way in ways.items()} for _ in range(runs)]
            print(f"{name}: {' '.join(argv)}  ({runs} rounds)")
            for label in ways:
                print(_row(label, [r[label] for r in rounds]))
            for label in list(ways)[1:]:
                extra_ms = statistics.median(r[label] - r["bare"] for r in rounds)
                print(f"  {label:<10} overhead median {extra_ms:7.1f} ms per run")


def one(mode: str, command: str, runs: int, docker: Sandbox | None) -> None:
    """``runs`` runs of one command one way, for an external whole-process timer."""
    with tempfile.TemporaryDirectory(prefix="cmx-bench-sandbox-") as work, ExitStack() as stack:
        ways = _runners(COMMANDS[command], work, _extra(work, docker, stack) if mode != "bare" else {})
        if mode not in ways:
            raise SystemExit(f"--one {mode}: not available here")
        for _ in range(runs):
            ways[mode]()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--one", choices=("bare", "sandbox", "session", "docker"),
                        help="only run one way, --runs times")
    parser.add_argument("--command", choices=sorted(COMMANDS), default="true")
    parser.add_argument("--no-docker", action="store_true", help="leave the docker sandbox out")
    args = parser.parse_args(argv)
    problem = BubblewrapSandbox().available()
    if problem:
        print(f"bubblewrap sandbox not usable here: {problem}", file=sys.stderr)
        return 2
    docker, why = (None, "left out (--no-docker)") if args.no_docker or args.one in ("bare", "sandbox", "session") \
        else _docker()
    if docker is None:
        print(f"docker sandbox: {why}", file=sys.stderr)
    if args.one:
        one(args.one, args.command, args.runs, docker)
    else:
        compare(args.runs, docker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
