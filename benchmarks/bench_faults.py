"""Time to detect and to recover from each injected fault, per executor (docs/faults.md).

For each executor and fault class (kill-step, oom, disk-full, partition, and kill-worker on
the executors that kill their workers: Slurm, Ray, Kubernetes), ``--rounds`` runs of one shell
step with the fault injected into its first attempt and ``--retries 1``; each run's ``faults`` entry gives the
time to detect (from the injection to the attempt's end, as the engine that ran the step
saw it) and the time to recover (from that end to the next attempt's start); the run's wall
time is set against a clean run's (the price of the fault, end to end). Prints one row per
executor and fault (median and max over the rounds) and, with ``--json``, the raw values.

    .venv/bin/python benchmarks/bench_faults.py [--rounds 3] [--executors local,k8s,slurm,ray]

The cluster executors run on loopback services this script starts and stops by PID: the
Kubernetes stand-in (plugins/k8s/tests/standin.py), a private single-node Slurm
(cmx_slurm.testing) and a private Ray cluster of a head without CPUs and two worker nodes,
each its own raylet (plugins/ray/tests/multinode.py: kill-worker kills a worker's raylet, and
a new worker node is added after each). One that cannot start is left out and says why.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from cmx_core.api import KILL_WORKER
from cmx_core.plugins.loader import get_registry
from cmx_core.testing.chaos import CHAOS_TAG, FAULTS, INPUTS, available_faults, chaos_recipe
from cmx_slurm.testing import start_private, stop_private

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--executors", default="local,k8s,slurm,ray")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cmx-bench-faults-"))
    (work / "recipes").mkdir()
    (work / "recipes" / "chaos-matrix.yaml").write_text(chaos_recipe())
    env = {"CMX_HOME": str(work / "home")}  # over the environment of each call (SLURM_CONF is set later)
    rows: list[dict[str, Any]] = []
    for executor in args.executors.split(","):
        with ExitStack() as stack:
            try:
                options, replace_worker = stack.enter_context(SERVICES[executor](work, env))
            except RuntimeError as exc:
                print(f"{executor}: left out: {exc}", file=sys.stderr)
                continue
            rows += measure(executor, options, work, env, args.rounds, replace_worker)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'executor':<8} {'fault':<10} {'detect s (median/max)':>22} {'recover s (median/max)':>23} "
              f"{'wall s faulted':>15} {'wall s clean':>13}")
        for row in rows:
            print(f"{row['executor']:<8} {row['fault']:<10} {_pair(row['detect_s']):>22} {_pair(row['recover_s']):>23} "
                  f"{statistics.median(row['wall_s']):>15.2f} {statistics.median(row['clean_wall_s']):>13.2f}")
    return 0


def _pair(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} / {max(values):.3f}" if values else "-"


Service = tuple[list[str], Callable[[], None]]
"""A started executor's ``--executor-opt`` values, and what to call after a kill-worker run
(a new worker node where the killed one does not come back)."""


def _nothing() -> None:
    pass


def measure(executor: str, options: list[str], work: Path, env: Mapping[str, str], rounds: int,
            replace_worker: Callable[[], None] = _nothing) -> list[dict[str, Any]]:
    base = ["--recipes", str(work / "recipes"), "--tags", f"test,{CHAOS_TAG}", "--executor", executor,
            *(f"--executor-opt={o}" for o in options), "--json"]
    clean = [_run([*base, "--what=clean"], env)["timing"]["wall_s"] for _ in range(rounds)]
    rows = []
    for fault in available_faults(KILL_WORKER in get_registry().executors[executor].injects):
        detect, recover, wall = [], [], []
        for _ in range(rounds):
            document = _run([*base, f"--what={INPUTS[fault]}", "--retries", "1", "--inject", FAULTS[fault][0]], env)
            if fault == KILL_WORKER:
                replace_worker()
            [entry] = document["faults"]
            if entry["class"] != FAULTS[fault][1] or not entry["recovered"]:
                raise SystemExit(f"{executor} {fault}: recorded {entry}")
            detect += [entry["detect_s"]] if entry["detect_s"] is not None else []
            recover += [entry["recover_s"]] if entry["recover_s"] is not None else []
            wall.append(document["timing"]["wall_s"])
        rows.append({"executor": executor, "fault": fault, "detect_s": detect, "recover_s": recover,
                     "wall_s": wall, "clean_wall_s": clean})
    return rows


def _run(args: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"cmx run {' '.join(args)}: exit {proc.returncode}: {proc.stderr[-1500:]}")
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


@contextmanager
def _local(work: Path, env: Mapping[str, str]) -> Iterator[Service]:
    yield [], _nothing


def _standin() -> Any:
    """The Kubernetes stand-in module of cmx-k8s's tests (a file, not an installed package)."""
    spec = importlib.util.spec_from_file_location("standin", ROOT / "plugins" / "k8s" / "tests" / "standin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["standin"] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def _k8s(work: Path, env: Mapping[str, str]) -> Iterator[Service]:
    standin = _standin()
    root = work / "standin"
    root.mkdir(exist_ok=True)
    server, state = standin.serve(root)
    try:
        config = standin.kubeconfig(work / "kubeconfig", server.server_address[1])
        yield [f"kubeconfig={config}", "image=cmx-python:standin", f"python={sys.executable}",
               f"cmx={sys.executable} -m cmx_core", "poll_s=0.2"], _nothing
    finally:
        state.stop_all()
        server.shutdown()
        server.server_close()


@contextmanager
def _slurm(work: Path, env: Mapping[str, str]) -> Iterator[Service]:
    home = Path(tempfile.mkdtemp(prefix="cmxslurm-"))  # its own directory: munge checks its parents
    cluster = start_private(home)
    os.environ["SLURM_CONF"] = cluster.conf
    try:
        yield ["poll_s=0.2"], _nothing
    finally:
        stop_private(cluster)
        os.environ.pop("SLURM_CONF", None)
        shutil.rmtree(home, ignore_errors=True)


def multinode() -> Any:
    """cmx-ray's test cluster module (plugins/ray/tests/multinode.py: a file, not a package)."""
    spec = importlib.util.spec_from_file_location("multinode", ROOT / "plugins" / "ray" / "tests" / "multinode.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def _ray(work: Path, env: Mapping[str, str]) -> Iterator[Service]:
    from cmx_ray.cluster import ray_env  # deferred: cmx-ray only when its executor is measured

    with multinode().running(2) as workers, ray_env():  # the cluster's variables are its drivers' too
        yield [f"address={workers.address}", "env=CMX_HOME"], workers.add


SERVICES = {"local": _local, "k8s": _k8s, "slurm": _slurm, "ray": _ray}


if __name__ == "__main__":
    raise SystemExit(main())
