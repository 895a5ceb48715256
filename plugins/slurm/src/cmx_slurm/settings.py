"""The slurm executor's settings: one ``--executor-opt KEY=VALUE`` per field (imported when
the plugin registers: keep it light)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cmx_core.api import ExecutorSettings


@dataclass(frozen=True)
class SlurmSettings(ExecutorSettings):
    """Where and with what the job runs. Resources left unset take what the plan asks for
    (its recipes' ``resources:``, then an accelerator requirement, which becomes a GPU
    request and a ``--constraint``), else Slurm's defaults."""

    partition: str | None = field(default=None, metadata={"help": "partition (sbatch --partition)"})
    account: str | None = field(default=None, metadata={"help": "account to charge (sbatch --account)"})
    qos: str | None = field(default=None, metadata={"help": "quality of service (sbatch --qos)"})
    nodes: int | None = field(default=None, metadata={
        "help": "nodes to allocate (default: the recipe's resources.nodes, else 1); with more than one task, srun "
                "starts the tasks with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK set; fewer nodes "
                "than the recipe asks keep its ranks, placed on these nodes"})
    ntasks_per_node: int | None = field(default=None, metadata={
        "help": "tasks per node, WORLD_SIZE = nodes x this (default: the recipe's resources.tasks_per_node, else 1)"})
    cpus_per_task: int | None = field(default=None, metadata={"help": "CPUs per task (sbatch --cpus-per-task)"})
    mem: str | None = field(default=None, metadata={"help": "memory per node, e.g. 16G (sbatch --mem)"})
    time: str | None = field(default=None, metadata={
        "help": "time limit, e.g. 30, 1:00:00 or 1-00:00:00 (sbatch --time); past it the run is a timeout"})
    gpus: str | None = field(default=None, metadata={
        "help": "GPUs per node: a count or type:count (default: 1 when the plan needs an accelerator, "
                "0 turns that off)"})
    gpu_request: Literal["gres", "gpus"] = field(default="gres", metadata={
        "help": "how GPUs are asked for: gres (--gres=gpu:N) or gpus (--gpus-per-node=N)"})
    gres: str | None = field(default=None, metadata={"help": "a raw --gres value (replaces the GPU request)"})
    constraint: str | None = field(default=None, metadata={
        "help": "node features (sbatch --constraint; default: the plan's accelerator tag)"})
    sbatch_args: tuple[str, ...] = field(default=(), metadata={
        "help": "extra sbatch arguments, comma separated (each one --key=value)"})
    cmx: str | None = field(default=None, metadata={
        "help": "the cmx command on the compute nodes, split like a shell would (default: this Python "
                "with -m cmx_core, which needs the same environment at the same path there)"})
    poll_s: float = field(default=0.5, metadata={"help": "first interval between squeue queries, in seconds"})
    poll_max_s: float = field(default=5.0, metadata={
        "help": "longest interval between squeue queries (the interval grows 1.5x per query)"})
