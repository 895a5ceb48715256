"""How the ranks of one training run start: the step names a launcher (``launcher:
torchrun``), finds it among the registered ones (:attr:`StepContext.launchers`: cmx-core's
``torchrun``, ``mpirun``, ``env``, ``none``, or a plugin's) and hands it the worker's
command and the run's :class:`RankLayout`; the launcher returns what this node runs. The
executor decides *where* the nodes are (Slurm's ``MASTER_ADDR``, a Kubernetes pod's
``CMX_NODE_RANK``): any executor composes any launcher.

Every launch runs in its own session with a wall-clock limit; on expiry the whole process
group is killed and the error says so, so a rank that waits for a peer never hangs a run.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psutil

from cmx_core.api import Launcher, RankLayout
from cmx_core.api.sandboxing import open_group, strike
from cmx_core.errors import ProcessEnd, StepFailed, UsageError
from cmx_train import progress
from cmx_train.config import TrainConfig
from cmx_train.gather import FileHub, send_files
from cmx_train.lost_rank import lost_rank, teardown_hint
from cmx_train.mlperf_log import MLPERF_LOG
from cmx_train.report import ENV
from cmx_train.user_script import REPORTS
from cmx_train.user_script import rows as user_rows
from cmx_train.worker import RANKS_FILE

WORKER = ("-m", "cmx_train.worker")


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    launcher: str
    rendezvous: str
    layout: RankLayout | None = None


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
    """The configuration's ``threads_per_rank`` (the step resolves it once for the sweep:
    :func:`cmx_train.threads.choose`), else ``CMX_TRAIN_THREADS``, else the cores shared out."""
    if config.threads_per_rank > 0:
        return config.threads_per_rank
    given = os.environ.get("CMX_TRAIN_THREADS")
    if given:
        return max(1, int(given))
    return max(1, (os.cpu_count() or 1) // config.nproc)


def layout_of(config: TrainConfig, env: Mapping[str, str]) -> RankLayout:
    """The rank layout of ``config`` on the node the executor started this step on: the
    rendezvous host is ``master_addr``, else ``MASTER_ADDR`` (the Slurm and k8s executors set
    it), else this machine; the node rank is ``CMX_NODE_RANK`` (k8s) or ``SLURM_NODEID``."""
    placed = config.master_addr or any(env.get(k) for k in ("MASTER_ADDR", "CMX_NODE_RANK", "SLURM_NODEID"))
    if config.nodes > 1 and not placed:
        raise UsageError(f"train: nodes {config.nodes}, but nothing placed this step on one of {config.nodes} nodes "
                         "(no MASTER_ADDR, CMX_NODE_RANK or SLURM_NODEID): run it with --executor slurm, ray or "
                         "k8s, or give master_addr and CMX_NODE_RANK on each machine")
    addr = config.master_addr or env.get("MASTER_ADDR") or "127.0.0.1"
    port = config.master_port or int(env.get("MASTER_PORT") or 0) or free_port()
    node_rank = int(env.get("CMX_NODE_RANK") or env.get("SLURM_NODEID") or 0)
    job_id = env.get("SLURM_JOB_ID") or env.get("CMX_JOB_ID") or "cmx-train"
    return RankLayout(nodes=config.nodes, procs_per_node=config.nproc, master_addr=addr, master_port=port,
                      node_rank=node_rank, job_id=job_id, rdzv_timeout_s=config.rdzv_timeout_s, env=env,
                      max_restarts=config.max_restarts)


def find_launcher(name: str, launchers: Mapping[str, Launcher]) -> Launcher:
    """The registered launcher ``name``, or a one-line UsageError naming the known ones."""
    found = launchers.get(name)
    if found is None:
        raise UsageError(f"train: launcher {name!r} is not a registered launcher "
                         f"(known: {', '.join(sorted(launchers)) or 'none registered'})")
    return found


def plan_launch(config: TrainConfig, config_file: Path, out: Path, launchers: Mapping[str, Launcher],
                metrics_file: Path | None = None) -> Launch:
    """The argument list and environment of the launch (no shell); ``metrics_file`` is the
    step's application channel, where each rank reports its progress (:mod:`.progress`)."""
    launcher = find_launcher(config.launcher, launchers)
    threads = str(threads_per_rank(config))
    env = {**os.environ, "CMX_TRAIN_THREADS": threads, "OMP_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1"}
    if metrics_file is not None:
        env[progress.ENV_FILE] = str(metrics_file)
    if config.script:
        env[ENV] = str(out / REPORTS)
    program = (sys.executable, config.script, *config.script_argv) if config.script else \
        (sys.executable, *WORKER, str(config_file), str(out))
    layout = layout_of(config, env)
    try:
        node = launcher.wrap(program, layout)
    except UsageError as exc:
        raise UsageError(f"train: {exc}") from None
    return Launch(node.argv, {**env, **node.env}, launcher.name, node.rendezvous, layout)


def run(config: TrainConfig, work: Path, log: Path, launchers: Mapping[str, Launcher],
        metrics_file: Path | None = None) -> Ranks:
    """Start the ranks, wait at most ``timeout_s``, and read what rank 0 gathered."""
    work.mkdir(parents=True, exist_ok=True)
    config_file = work / "config.json"
    config.write(config_file)
    launch = plan_launch(config, config_file, work, launchers, metrics_file)
    if config.script:
        (work / REPORTS).mkdir(exist_ok=True)  # where the script's ranks report (cmx_train.report)
    (work / "launch.json").write_text(json.dumps({"argv": list(launch.argv), "launcher": launch.launcher,
                                                  "rendezvous": launch.rendezvous}, indent=1), encoding="utf-8")
    hub = _hub(config, launch)  # before the launch: the other nodes send to it when theirs ends
    began = time.monotonic()
    group = open_group()  # the ranks' memory cgroup: their OOM kills are the step's own evidence
    with open(log, "ab") as out:
        offset = out.tell()  # this launch's part of the log, for torchrun's report
        proc = subprocess.Popen([*(group.join() if group else ()), *launch.argv], env=dict(launch.env), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        if group is not None:
            group.started(proc.pid)
        try:
            strike(proc)  # --inject kill-step@50%: at rank 0's reported progress (cmx_train.progress)
            code = proc.wait(timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise StepFailed(f"train: the {launch.launcher} launch of {config.world_size} ranks ran past timeout_s "
                             f"{config.timeout_s:g} s and was killed{_first_error(work, ' (', ')')}") from None
        finally:
            _kill(proc)
            counted = group.close() if group is not None else None
    wall = time.monotonic() - began
    rank = int(launch.env.get("RANK", "0")) if launch.launcher == "env" else 0
    if code != 0:
        kills, group_path = (counted.kills, str(counted.group)) if counted is not None else (0, None)
        _failed(launch, code, wall, (work, log, offset), kills, group_path)
    if hub is not None:
        hub.collect(work, gathered(config))
    elif gathered(config) and launch.layout is not None:
        send_files(launch.layout.master_addr, launch.layout.master_port, work, gathered(config), config.rdzv_timeout_s)
    every = config.nodes < 2 or (launch.layout is not None and launch.layout.node_rank == 0)
    rows = _script_rows(config, work, every) if config.script else _rows(work, rank)
    return Ranks(tuple(rows), rank, wall, launch)


def gathered(config: TrainConfig) -> list[str]:
    """What node 0 of several needs from wherever it was written (:mod:`.gather`): a
    script's rank reports, a time-to-accuracy run's MLPerf log. Only under torchrun, one step
    a node (under ``env`` the step of global rank 0 writes the log and gives the result)."""
    if config.nodes < 2 or config.launcher != "torchrun":
        return []
    if config.script:
        return [f"{REPORTS}/rank-{r}.jsonl" for r in range(config.world_size)]
    return [MLPERF_LOG] if config.mode == "time-to-accuracy" else []


def _hub(config: TrainConfig, launch: Launch) -> FileHub | None:
    """Node 0's hub for the files of a run on several nodes (:mod:`.gather`)."""
    layout = launch.layout
    if not gathered(config) or layout is None or layout.node_rank != 0:
        return None
    return FileHub(layout.master_addr, layout.master_port, config.rdzv_timeout_s)


def _script_rows(config: TrainConfig, work: Path, every: bool) -> list[dict[str, Any]]:
    """The figures of every rank (``every``: on one node, or on node 0, which has them all
    once the other nodes sent theirs), else of the ranks whose reports are on this node;
    kept as the worker keeps its own."""
    folder = work / REPORTS
    ranks = range(config.world_size) if every else \
        [r for r in range(config.world_size) if (folder / f"rank-{r}.jsonl").is_file()]
    rows = user_rows(folder, ranks, config.warmup_steps)
    (work / RANKS_FILE).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return rows


def _failed(launch: Launch, code: int, wall: float, files: tuple[Path, Path, int], oom_kills: int,
            memory_group: str | None) -> NoReturn:
    """A failed launch: the rank it lost first, with that rank's own error (torchrun's report,
    :mod:`cmx_train.lost_rank`), else the first error a rank wrote; with the OOM kills the
    ranks' own memory cgroup counted. ``files``: the work directory, the log and where this launch's part starts."""
    work, log, offset = files
    report = _read_from(log, offset)
    lost = lost_rank(report, work) if launch.launcher == "torchrun" else None
    head = f"train: {launch.launcher} exited {code} after {wall:.1f} s"
    if lost is None:
        signal_number = -code if code < 0 else None
        raise StepFailed(f"{head}{_first_error(work, ': ', '')}; log: {log}",
                         ended=ProcessEnd(signal=signal_number, oom_kills=oom_kills, memory_group=memory_group))
    how = f"was killed by signal {lost.signal} ({_signal_name(lost.signal)})" if lost.signal is not None else "failed"
    raise StepFailed(f"{head}: rank {lost.rank} (pid {lost.pid}) {how}: {lost.error}{teardown_hint(report, lost)}; "
                     f"log: {log}",
                     ended=ProcessEnd(signal=lost.signal, rank=lost.rank, error=lost.error, oom_kills=oom_kills,
                                      memory_group=memory_group))


def _read_from(log: Path, offset: int) -> str:
    try:
        with open(log, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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
