"""One rank of a training run: ``python -m cmx_train.worker CONFIG.json OUT_DIR``.

Started by torchrun (``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set), by mpirun (OpenMPI's
``OMPI_COMM_WORLD_*``), by an executor that starts the ranks itself (Slurm's tasks) or
alone. The ranks gather every rank's figures and each writes ``OUT_DIR/ranks.json``; any rank that
fails writes ``OUT_DIR/error-rank-N.txt`` (one line) and exits 3, so the launcher can say
why in one line instead of a traceback per rank.

Data parallel with the *global* batch split evenly: rank r of W takes the r-th slice of every
global batch of one seeded permutation, DDP averages the gradients, so W ranks take the same
steps as one rank with the whole batch (up to float summation order).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import resource
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx_train import models
from cmx_train.config import TrainConfig
from cmx_train.energy import Meter
from cmx_train.mlperf_log import MLPERF_LOG, MlLog
from cmx_train.progress import RankProgress

RANKS_FILE = "ranks.json"
EXIT_FAILED = 3


@dataclass
class Rank:
    rank: int
    world: int
    local_rank: int


@dataclass
class Figures:
    """What one rank measured."""

    rank: int
    host: str
    samples: int = 0
    window_s: float = 0.0
    step_times_s: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    peak_memory_bytes: int = 0
    epochs: int = 0
    val_accuracy: list[float] = field(default_factory=list)
    time_to_target_s: float | None = None
    epochs_to_target: int | None = None
    run_s: float = 0.0
    oom: bool = False
    oom_message: str = ""
    energy_j: float | None = None  # this node's, read by its local rank 0 over the timed window
    energy_source: str = ""
    threads: int = 0  # torch.get_num_threads() as the rank trained, read back, not assumed
    interop_threads: int = 0
    omp_num_threads: str | None = None
    resumed_from_step: int = 0  # the step of the checkpoint this run started from (0: none)
    restarts: int = 0  # torchrun's restarts of the ranks before this run (TORCHELASTIC_RESTART_COUNT)


def rank_from_env() -> Rank:
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" in env and "RANK" not in env:
        return Rank(int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                    int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
    return Rank(int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")), int(env.get("LOCAL_RANK", "0")))


def main(argv: list[str]) -> int:
    config = TrainConfig.read(Path(argv[0]))
    out = Path(argv[1])
    me = rank_from_env()
    try:
        figures = _run(config, me, out)
    except Exception as exc:  # noqa: BLE001 - one line for the launcher; the traceback stays in the rank's log

        traceback.print_exc()
        line = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        (out / f"error-rank-{me.rank}.txt").write_text(line + "\n", encoding="utf-8")
        return EXIT_FAILED
    # every rank holds every rank's figures (all_gather): each writes them, so the task that
    # hosts global rank 0 need not be the one whose result is kept (c10d assigns ranks)
    tmp = out / f"{RANKS_FILE}.part-{me.rank}"
    tmp.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    tmp.replace(out / RANKS_FILE)
    return 0


def _run(config: TrainConfig, me: Rank, out: Path) -> list[dict[str, Any]]:
    import torch  # deferred: torch only when this runs (0 modules)
    import torch.distributed as dist  # deferred: torch only when this runs (0 modules)

    torch.set_num_threads(config.threads_per_rank or max(1, int(os.environ.get("CMX_TRAIN_THREADS", "1"))))
    if me.world != config.world_size:
        raise RuntimeError(f"world size mismatch: the launcher started {me.world} ranks, "
                           f"the run needs nproc x nodes = {config.world_size}")
    device = torch.device("cuda", me.local_rank) if config.device == "cuda" else torch.device("cpu")
    if config.device == "cuda":
        torch.cuda.set_device(device)
    if me.world > 1:
        _init_group(config, me)
    try:
        figures = _train(config, me, out, device)
        rows = [_as_dict(figures)]
        if me.world > 1:
            gathered: list[Any] = [None] * me.world
            dist.all_gather_object(gathered, rows[0])
            rows = gathered
        return rows
    finally:
        if me.world > 1 and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.barrier()
            dist.destroy_process_group()


def _init_group(config: TrainConfig, me: Rank) -> None:
    import torch.distributed as dist  # deferred: torch only when this runs (0 modules)

    timeout = datetime.timedelta(seconds=config.rdzv_timeout_s)
    addr = os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    port = os.environ.setdefault("MASTER_PORT", "29500")
    os.environ.update(RANK=str(me.rank), WORLD_SIZE=str(me.world), LOCAL_RANK=str(me.local_rank))
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
    try:  # env:// keeps torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE) where there is one
        if restart and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            # the agent's store outlives a restart (torch 2.13) and still holds the lost round's
            # addresses: the restarted ranks meet under a prefix of their own round
            client = dist.TCPStore(addr, int(port), me.world, is_master=False, timeout=timeout)
            store = dist.PrefixStore(f"/cmx/restart_{restart}", client)
            dist.init_process_group(config.backend, store=store, rank=me.rank, world_size=me.world, timeout=timeout)
        else:
            dist.init_process_group(config.backend, init_method="env://", timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any rendezvous failure becomes one line
        raise RuntimeError(f"rendezvous at {addr}:{port} failed for rank {me.rank} of {me.world} within "
                           f"{config.rdzv_timeout_s:g} s ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
                           ) from None


def _as_dict(figures: Figures) -> dict[str, Any]:
    return asdict(figures)


def _train(config: TrainConfig, me: Rank, out: Path, device: Any) -> Figures:
    import torch  # deferred: torch only when this runs (0 modules)
    import torch.distributed as dist  # deferred: torch only when this runs (0 modules)
    from torch.nn.parallel import DistributedDataParallel  # deferred: torch only when this runs (0 modules)


    log = MlLog(out / MLPERF_LOG if me.rank == 0 and config.mode == "time-to-accuracy" else None, config)
    log.init_start()
    data = models.data(config)
    model, _info = models.build(config)
    saved = load_checkpoint(config)
    if saved is not None:
        model.load_state_dict(saved["model"])
    model.to(device)
    net: torch.nn.Module = DistributedDataParallel(model) if me.world > 1 else model
    opt = torch.optim.SGD(net.parameters(), lr=config.lr, momentum=0.9)
    if saved is not None:
        opt.load_state_dict(saved["optimizer"])
    scaler = torch.amp.GradScaler(device.type) if config.precision == "fp16" else None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.precision)
    loss_fn = torch.nn.CrossEntropyLoss()
    figures = Figures(rank=me.rank, host=socket.gethostname(), threads=torch.get_num_threads(),
                      interop_threads=torch.get_num_interop_threads(),
                      omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
                      resumed_from_step=int(saved["done"]) if saved is not None else 0,
                      restarts=int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0))

    meter = Meter(config.device) if me.local_rank == 0 else None
    if meter is not None:
        figures.energy_source = meter.source if meter.source != "unavailable" else f"unavailable: {meter.reason}"
    if config.mode == "max-batch":
        _limit_memory(config)

    def autocast() -> Any:
        return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()

    own: list[Any] = [None]

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(net(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        value = loss.detach().float()
        own[0] = value.clone() if me.world > 1 else value  # this rank's loss, read only when reported
        if me.world > 1:
            dist.all_reduce(value)
            value /= me.world
        return float(value)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    log.params(len(data.train_y), len(data.val_y))
    log.init_stop()
    _barrier(me)
    log.run_start()
    began = time.perf_counter()
    progress = RankProgress.from_env(me.rank)
    start = (int(saved["done"]), int(saved["epoch"]), int(saved["position"])) if saved is not None else (0, 0, 0)

    def save(done: int, epoch: int, position: int) -> float:
        """Rank 0 saves where the run is (the ranks' weights are the same) while the others wait
        for it; the seconds of that pause, the same on every rank, which each leaves out of its
        timed window (a rank that did not wait would pay it in its next step instead)."""
        t0 = time.perf_counter()
        if me.rank == 0:
            save_checkpoint(config, {"model": model.state_dict(), "optimizer": opt.state_dict(), "done": done,
                                     "epoch": epoch, "position": position})
        _barrier(me)
        return time.perf_counter() - t0

    loop = _Loop(config, me, data, step, device, figures, progress, lambda: float(own[0]), start, save)
    if config.mode == "time-to-accuracy":
        _to_accuracy(loop, net, autocast, log, began)
    else:
        try:
            _timed(loop, sync, meter)
        except (torch.OutOfMemoryError, MemoryError, RuntimeError) as exc:
            if config.mode != "max-batch" or not _is_oom(exc):
                raise
            figures.oom, figures.oom_message = True, " ".join(str(exc).split())[:300]
    progress.close()
    figures.run_s = time.perf_counter() - began
    figures.peak_memory_bytes = _peak_memory(device)
    log.run_stop(figures.time_to_target_s is not None)
    return figures


def batches(config: TrainConfig, me: Rank, n: int, epoch: int) -> Iterator[Any]:
    """The local slices of every full global batch of ``epoch`` (one seeded permutation)."""
    import torch  # deferred: torch only when this runs (0 modules)

    order = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed * 1000 + epoch))
    per = config.global_batch_size // me.world if config.mode != "max-batch" else config.batch_size
    size = per * me.world
    if n < size:  # a batch bigger than the data set: sample with replacement
        order = torch.randint(0, n, (size,), generator=torch.Generator().manual_seed(config.seed * 1000 + epoch))
        n = size
    for start in range(0, n - size + 1, size):
        yield order[start + me.rank * per: start + (me.rank + 1) * per]


@dataclass(frozen=True)
class _Loop:
    """What both training loops of one rank share: its configuration and place, the data,
    the one-step function, the device and the figures they fill in."""

    config: TrainConfig
    me: Rank
    data: Any
    step: Any
    device: Any
    figures: Figures
    progress: RankProgress
    own_loss: Callable[[], float]
    start: tuple[int, int, int] = (0, 0, 0)
    """Where the run starts: steps done, epoch, batches of that epoch done (a checkpoint's)."""
    save: Callable[[int, int, int], float] = lambda done, epoch, position: 0.0
    """Save a checkpoint at (steps done, epoch, batches of it done); the seconds it took."""


def _timed(loop: _Loop, sync: Any, meter: Any) -> None:
    config, me, data, step, device, figures = loop.config, loop.me, loop.data, loop.step, loop.device, loop.figures
    total = config.warmup_steps + config.steps
    done, epoch, skip = loop.start
    window_start, saving, opened = 0.0, 0.0, False
    while done < total:
        for position, idx in enumerate(batches(config, me, len(data.train_y), epoch)):
            if position < skip:  # done before the checkpoint this run resumed from
                continue
            if not opened and done >= config.warmup_steps:  # (a resumed run opens it at its first step)
                sync()
                _barrier(me)
                window_start, opened = time.perf_counter(), True
                if meter is not None:
                    meter.start()
            t0 = time.perf_counter()
            figures.losses.append(step(data.train_x[idx].to(device), data.train_y[idx].to(device)))
            sync()
            took = time.perf_counter() - t0
            if done >= config.warmup_steps:
                figures.step_times_s.append(took)
                figures.samples += len(idx)
            loop.progress.step(len(idx), took, loop.own_loss, fraction=(done + 1) / total)
            done += 1
            if config.checkpoint_every and done % config.checkpoint_every == 0 and done < total:
                saving += loop.save(done, epoch, position + 1)  # not the workload's time
            if done == total:
                break
        skip = 0
        epoch += 1
    figures.window_s = time.perf_counter() - window_start - saving
    if meter is not None:
        figures.energy_j = meter.stop()
    figures.epochs = epoch


def _to_accuracy(loop: _Loop, net: Any, autocast: Any, log: Any, began: float) -> None:
    import torch  # deferred: torch only when this runs (0 modules)

    config, me, data, step, device, figures = loop.config, loop.me, loop.data, loop.step, loop.device, loop.figures

    for epoch in range(config.max_epochs):
        log.epoch_start(epoch)
        net.train()
        for idx in batches(config, me, len(data.train_y), epoch):
            t0 = time.perf_counter()
            figures.losses.append(step(data.train_x[idx].to(device), data.train_y[idx].to(device)))
            figures.step_times_s.append(time.perf_counter() - t0)
            figures.samples += len(idx)
            loop.progress.step(len(idx), figures.step_times_s[-1], loop.own_loss, fraction=epoch / config.max_epochs)
        log.epoch_stop(epoch)
        net.eval()
        with torch.no_grad(), autocast():
            predicted = net(data.val_x.to(device)).argmax(dim=1).cpu()
        accuracy = float((predicted == data.val_y).float().mean())
        log.eval_accuracy(epoch, accuracy, figures.samples * me.world)
        figures.val_accuracy.append(accuracy)
        figures.epochs = epoch + 1
        if accuracy >= config.target_accuracy:
            figures.time_to_target_s = time.perf_counter() - began
            figures.epochs_to_target = epoch + 1
            break
    figures.window_s = time.perf_counter() - began


CHECKPOINT = "train.pt"


def load_checkpoint(config: TrainConfig) -> dict[str, Any] | None:
    """The checkpoint a run resumes from (``checkpoint_every`` set and one saved), else None."""
    path = Path(config.checkpoint_dir) / CHECKPOINT if config.checkpoint_every and config.checkpoint_dir else None
    if path is None or not path.is_file():
        return None
    import torch  # deferred: torch only when this runs (0 modules)

    loaded: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    return loaded


def save_checkpoint(config: TrainConfig, state: dict[str, Any]) -> None:
    """Write the checkpoint atomically: a kill mid-write leaves the previous one whole."""
    import torch  # deferred: torch only when this runs (0 modules)

    path = Path(config.checkpoint_dir) / CHECKPOINT
    part = path.with_name(f".{CHECKPOINT}.tmp")
    torch.save(state, part)
    os.replace(part, path)


def _barrier(me: Rank) -> None:
    if me.world > 1:
        import torch.distributed as dist  # deferred: torch only when this runs (0 modules)

        dist.barrier()


def _limit_memory(config: TrainConfig) -> None:
    """The max-batch probe's budget on the CPU: the address space may grow by
    ``memory_limit_mb`` beyond what the process holds now; a bigger allocation fails as
    torch's ``DefaultCPUAllocator: can't allocate memory``, a real out-of-memory."""
    if config.device != "cpu" or config.memory_limit_mb <= 0:
        return
    import torch  # deferred: torch only when this runs (0 modules)

    torch.backends.mkldnn.enabled = False  # oneDNN's own allocation failures read "could not create a primitive"
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[0])
    now = pages * os.sysconf("SC_PAGE_SIZE")
    limit = now + config.memory_limit_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or \
        "out of memory" in text or "can't allocate memory" in text or "cannot allocate memory" in text


def _peak_memory(device: Any) -> int:
    if device.type == "cuda":
        import torch  # deferred: torch only when this runs (0 modules)

        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: gloo's threads abort in it now and then
