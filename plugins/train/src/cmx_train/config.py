"""The typed configuration of one training run, checked from a step's ``with:`` values.

Every bad value is a :class:`UsageError` (exit 2) whose one line names the key, so
``--batch-size=7`` with two ranks says ``train: batch_size 7 is not divisible by the 2 ranks``
before any process starts. Light: no torch here.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError

MODES = ("throughput", "time-to-accuracy", "max-batch")
MODELS = ("digits-cnn", "resnet50", "bert-base")
PRECISIONS = ("fp32", "bf16", "fp16")
BACKENDS = ("gloo", "nccl")
DEVICES = ("cpu", "cuda")
SCALINGS = ("strong", "weak")

PARAMS: dict[str, str] = {
    "mode": "throughput, time-to-accuracy or max-batch",
    "model": "digits-cnn (CPU default: a small CNN on scikit-learn's digits), resnet50 or bert-base",
    "weights": "a state_dict file to start from (empty: random initialisation; the result says which)",
    "precision": "fp32, bf16 or fp16 (torch AMP autocast; fp16 adds a GradScaler)",
    "device": "cpu or cuda",
    "backend": "torch.distributed backend: gloo or nccl",
    "launcher": "how ranks start, a registered launcher (cmx plugins list): torchrun, mpirun, env (the executor "
                "started them: RANK/WORLD_SIZE set) or none",
    "nproc": "processes per node",
    "nodes": "nodes (torchrun: --nnodes with the c10d rendezvous on MASTER_ADDR)",
    "batch_size": "strong scaling: the global batch size (split evenly over the ranks); weak: the batch of each rank",
    "scaling": "strong (the global batch stays fixed as ranks grow) or weak (the batch of each rank stays fixed); "
               "says which 1-process point is the baseline of scaling_efficiency",
    "threads_per_rank": "torch threads and OMP_NUM_THREADS of every rank (0: the cores divided by the largest "
                        "ranks per node of the sweep, at least 1; outside a sweep by this run's nproc)",
    "steps": "throughput: timed steps",
    "warmup_steps": "throughput: untimed steps before the timed ones",
    "lr": "learning rate (SGD with momentum 0.9)",
    "seed": "the seed of weights, data order and augmentation (recorded in the result)",
    "target_accuracy": "time-to-accuracy: validation accuracy that ends the run",
    "max_epochs": "time-to-accuracy: epochs before the run stops unconverged",
    "max_batch": "max-batch: the largest batch size tried",
    "memory_limit_mb": "max-batch on the CPU: address-space budget of each probe above its start (0: none)",
    "image_size": "resnet50: generated image side in pixels",
    "seq_len": "bert-base: generated sequence length",
    "samples": "resnet50 / bert-base: generated training samples",
    "timeout_s": "wall-clock limit of the whole launch (the ranks are killed after it)",
    "rdzv_timeout_s": "seconds the ranks wait for each other at the rendezvous before failing",
    "master_addr": "rendezvous host (default: MASTER_ADDR, else 127.0.0.1)",
    "master_port": "rendezvous port (0: MASTER_PORT, else a free one)",
    "baseline_samples_per_s": "samples/s of the 1-process point (0: found in the sweep's own points)",
    "script": "throughput: your own torchrun-compatible training script, run on every rank instead of cmx's "
              "model (it reports each step with cmx_train.report.report; empty: cmx's model)",
    "script_args": "the script's arguments, split as a shell would (nothing reaches a shell)",
    "checkpoint_every": "throughput: rank 0 saves the model, optimiser and step every N steps into the step's "
                        "checkpoint directory, and a run that finds one resumes from it (0: never)",
    "max_restarts": "torchrun's --max-restarts: a failed rank restarts every rank of the node, each resuming from "
                    "the last checkpoint (0: none; the run's own --retries still apply)",
}


@dataclass(frozen=True)
class TrainConfig:
    mode: str = "throughput"
    model: str = "digits-cnn"
    weights: str = ""
    precision: str = "fp32"
    device: str = "cpu"
    backend: str = "gloo"
    launcher: str = "torchrun"
    nproc: int = 1
    nodes: int = 1
    batch_size: int = 64
    scaling: str = "strong"
    threads_per_rank: int = 0
    steps: int = 20
    warmup_steps: int = 3
    lr: float = 0.05
    seed: int = 0
    target_accuracy: float = 0.95
    max_epochs: int = 30
    max_batch: int = 4096
    memory_limit_mb: int = 0
    image_size: int = 224
    seq_len: int = 128
    samples: int = 256
    timeout_s: float = 600.0
    rdzv_timeout_s: float = 30.0
    master_addr: str = ""
    master_port: int = 0
    baseline_samples_per_s: float = 0.0
    script: str = ""
    script_args: str = ""
    checkpoint_every: int = 0
    max_restarts: int = 0
    checkpoint_dir: str = ""
    """Set by the step (not a parameter): its checkpoint directory, kept across attempts."""

    @property
    def script_argv(self) -> tuple[str, ...]:
        """``script_args`` split as a shell would (checked when the configuration is parsed)."""
        return tuple(shlex.split(self.script_args))

    @property
    def world_size(self) -> int:
        return self.nproc * self.nodes

    @property
    def global_batch_size(self) -> int:
        """Strong scaling: ``batch_size``; weak: ``batch_size`` on every rank."""
        return self.batch_size * self.world_size if self.scaling == "weak" else self.batch_size

    @property
    def per_rank_batch(self) -> int:
        return self.global_batch_size // self.world_size

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True), encoding="utf-8")

    @staticmethod
    def read(path: Path) -> TrainConfig:
        return TrainConfig(**json.loads(path.read_text(encoding="utf-8")))


_CHOICES = {"mode": MODES, "model": MODELS, "precision": PRECISIONS, "backend": BACKENDS, "device": DEVICES,
            "scaling": SCALINGS}
"""The launcher is not among them: the registered launchers decide (:func:`cmx_train.launch.find_launcher`)."""
_MIN = {"nproc": 1, "nodes": 1, "batch_size": 1, "steps": 1, "warmup_steps": 0, "seed": 0, "max_epochs": 1,
        "max_batch": 1, "memory_limit_mb": 0, "image_size": 32, "seq_len": 8, "samples": 1, "timeout_s": 1,
        "rdzv_timeout_s": 1, "master_port": 0, "baseline_samples_per_s": 0, "threads_per_rank": 0,
        "checkpoint_every": 0, "max_restarts": 0}


def parse(params: Mapping[str, Any]) -> TrainConfig:
    """The configuration of ``params``; a bad value raises a one-line :class:`UsageError`."""
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise UsageError(f"train: unknown parameter {unknown[0]!r} (known: {', '.join(sorted(PARAMS))})")
    values: dict[str, Any] = {}
    for f in fields(TrainConfig):
        if f.name not in params or params[f.name] is None:
            continue
        values[f.name] = _coerce(f.name, params[f.name], type(getattr(TrainConfig(), f.name)))
    config = TrainConfig(**values)
    _check(config)
    return replace(config, script=str(Path(config.script).resolve())) if config.script else config


def _coerce(key: str, raw: Any, kind: type) -> Any:
    try:
        if kind is bool or isinstance(raw, bool):
            raise ValueError
        if kind is int:
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            value: Any = int(str(raw).strip()) if not isinstance(raw, (int, float)) else int(raw)
        elif kind is float:
            value = float(raw)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError
        else:
            value = str(raw)
    except (TypeError, ValueError):
        raise UsageError(f"train: {key} must be {kind.__name__}, got {raw!r}") from None
    if key in _CHOICES and value not in _CHOICES[key]:
        raise UsageError(f"train: {key} must be one of {', '.join(_CHOICES[key])}, got {value!r}")
    if key in _MIN and value < _MIN[key]:
        raise UsageError(f"train: {key} must be at least {_MIN[key]}, got {value!r}")
    return value


def _check(config: TrainConfig) -> None:
    if not 0 < config.target_accuracy <= 1:
        raise UsageError(f"train: target_accuracy must be in (0, 1], got {config.target_accuracy}")
    if config.lr <= 0:
        raise UsageError(f"train: lr must be positive, got {config.lr}")
    if config.mode == "max-batch" and config.scaling == "weak":
        raise UsageError("train: scaling weak applies to throughput and time-to-accuracy (max-batch searches the "
                         "batch of each rank)")
    if config.mode != "max-batch" and config.global_batch_size % config.world_size:
        raise UsageError(f"train: batch_size {config.batch_size} is not divisible by the {config.world_size} ranks "
                         f"(nproc {config.nproc} x nodes {config.nodes})")
    if config.backend == "nccl" and config.device != "cuda":
        raise UsageError("train: backend nccl needs device cuda (use backend gloo on the CPU)")
    if config.launcher == "none" and config.world_size > 1:
        raise UsageError(f"train: launcher none starts one process, but nproc x nodes is {config.world_size}")
    if config.launcher == "mpirun" and config.nodes > 1:
        raise UsageError("train: launcher mpirun here runs on one node; use nodes 1 (or launcher env under Slurm)")
    if config.script:
        _check_script(config)
    if config.max_restarts and config.launcher != "torchrun":
        raise UsageError(f"train: max_restarts needs launcher torchrun (it restarts the ranks), not {config.launcher}")
    if config.checkpoint_every and (config.mode != "throughput" or config.script):
        raise UsageError("train: checkpoint_every applies to cmx's own model in mode throughput")
    if config.weights and not Path(config.weights).is_file():
        raise UsageError(f"train: weights {config.weights!r} is not a file")


def _check_script(config: TrainConfig) -> None:
    if config.mode != "throughput":
        raise UsageError(f"train: script runs in mode throughput, not {config.mode}")
    if not Path(config.script).is_file():
        raise UsageError(f"train: script {config.script!r} is not a file")
    if config.nodes > 1 and config.launcher != "torchrun":
        raise UsageError(f"train: script on several nodes runs under launcher torchrun (one cmx step a node "
                         f"gathers its ranks' reports), not {config.launcher}")
    try:
        shlex.split(config.script_args)
    except ValueError as exc:
        raise UsageError(f"train: script_args {config.script_args!r}: {exc}") from None
