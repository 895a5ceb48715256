"""Launchers: how the ranks of one training run start (an axis separate from the executor,
which decides *where* ``cmx run`` itself runs).

* ``torchrun``: ``python -m torch.distributed.run --nproc-per-node N``; one node uses
  ``--standalone``, several use ``--nnodes`` with the c10d rendezvous on ``MASTER_ADDR``
  (the first host, as the Slurm executor sets it), one torchrun per node.
* ``mpirun``: Debian's OpenMPI, ``mpirun -np N``; the worker reads ``OMPI_COMM_WORLD_*``.
* ``env``: the executor already started one task per rank (Slurm's srun sets ``RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``): this task runs one worker in place.
* ``none``: one process, no process group.

Every launch runs in its own session with a wall-clock limit; on expiry the whole process
group is killed and the error says so, so a rank that waits for a peer never hangs a run.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from cmx_core.errors import StepFailed, UsageError
from cmx_train.config import TrainConfig
from cmx_train.worker import RANKS_FILE

WORKER = ("-m", "cmx_train.worker")


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    launcher: str
    rendezvous: str


@dataclass(frozen=True)
class Ranks:
    """What a launch brought back: every rank's figures (rank 0 gathers them), or for a
    rank other than 0 under ``env`` only that rank's own status."""

    rows: tuple[dict[str, Any], ...]
    rank: int
    wall_s: float
    launch: Launch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def threads_per_rank(config: TrainConfig) -> int:
    given = os.environ.get("CMX_TRAIN_THREADS")
    if given:
        return max(1, int(given))
    return max(1, (os.cpu_count() or 1) // config.nproc)


def plan_launch(config: TrainConfig, config_file: Path, out: Path) -> Launch:
    """The argument list and environment of the launch (no shell)."""
    worker = [*WORKER, str(config_file), str(out)]
    threads = str(threads_per_rank(config))
    env = {**os.environ, "CMX_TRAIN_THREADS": threads, "OMP_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1"}
    addr = config.master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = config.master_port or int(os.environ.get("MASTER_PORT") or 0) or free_port()
    if config.launcher == "none":
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        return Launch((sys.executable, *worker), env, "none", "none")
    if config.launcher == "env":
        for key in ("RANK", "WORLD_SIZE"):
            if key not in os.environ:
                raise UsageError(f"train: launcher env needs {key} set by the executor (Slurm's srun sets it)")
        env.update(MASTER_ADDR=addr, MASTER_PORT=str(port))
        env.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
        return Launch((sys.executable, *worker), env, "env", f"tcp://{addr}:{port}")
    if config.launcher == "mpirun":
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            raise UsageError("train: launcher mpirun: no mpirun on PATH (Debian: apt-get install openmpi-bin)")
        env.update(MASTER_ADDR=addr, MASTER_PORT=str(port), OMPI_MCA_btl="self,tcp",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        argv = [mpirun, "-np", str(config.nproc), "--oversubscribe", "--bind-to", "none",
                *(x for key in ("MASTER_ADDR", "MASTER_PORT", "CMX_TRAIN_THREADS", "OMP_NUM_THREADS", "PATH",
                                "PYTHONPATH", "OMPI_MCA_btl") if key in env for x in ("-x", key)),
                sys.executable, *worker]
        return Launch(tuple(argv), env, "mpirun", f"tcp://{addr}:{port}")
    run = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={config.nproc}", "--max-restarts=0",
           "--monitor-interval=0.5"]
    if config.nodes == 1:
        run += ["--standalone"]
        rendezvous = "c10d standalone (127.0.0.1)"
    else:
        endpoint = f"{addr}:{port + 1}"
        run += [f"--nnodes={config.nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
                f"--rdzv-id={os.environ.get('SLURM_JOB_ID', 'cmx-train')}",
                f"--rdzv-conf=join_timeout={int(config.rdzv_timeout_s)}"]
        rendezvous = f"c10d {endpoint}"
    return Launch((*run, *worker), env, "torchrun", rendezvous)


def run(config: TrainConfig, work: Path, log: Path) -> Ranks:
    """Start the ranks, wait at most ``timeout_s``, and read what rank 0 gathered."""
    work.mkdir(parents=True, exist_ok=True)
    config_file = work / "config.json"
    config.write(config_file)
    launch = plan_launch(config, config_file, work)
    (work / "launch.json").write_text(json.dumps({"argv": list(launch.argv), "launcher": launch.launcher,
                                                  "rendezvous": launch.rendezvous}, indent=1), encoding="utf-8")
    began = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(launch.argv, env=dict(launch.env), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = proc.wait(timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise StepFailed(f"train: the {launch.launcher} launch of {config.world_size} ranks ran past timeout_s "
                             f"{config.timeout_s:g} s and was killed{_first_error(work, ' (', ')')}") from None
        finally:
            _kill(proc)
    wall = time.monotonic() - began
    rank = int(launch.env.get("RANK", "0")) if launch.launcher == "env" else 0
    if code != 0:
        raise StepFailed(f"train: {launch.launcher} exited {code} after {wall:.1f} s"
                         f"{_first_error(work, ': ', '')}; log: {log}")
    rows = _rows(work, rank)
    return Ranks(tuple(rows), rank, wall, launch)


def _rows(work: Path, rank: int) -> list[dict[str, Any]]:
    path = work / RANKS_FILE
    if path.is_file():
        rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return rows
    if rank != 0:
        return []
    raise StepFailed(f"train: rank 0 wrote no {RANKS_FILE} in {work}")


def _first_error(work: Path, before: str, after: str) -> str:
    errors = sorted(work.glob("error-rank-*.txt"))
    if not errors:
        return ""
    rank = errors[0].stem.rsplit("-", 1)[1]
    line = errors[0].read_text(encoding="utf-8").strip()
    return f"{before}rank {rank}: {line}{after}"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """The launch's whole process tree: torchrun's ranks start sessions of their own, so the
    launcher's process group alone would leave them training on (found while the launcher
    still holds them, then killed with it)."""
    try:
        below = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        below = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in below:
        try:
            child.kill()
        except psutil.Error:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def argv_text(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
