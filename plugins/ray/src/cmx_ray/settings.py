"""The ray executor's settings (imported when the plugin registers: keep it light)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cmx_core.api import ExecutorSettings


@dataclass(frozen=True)
class RaySettings(ExecutorSettings):
    """``--executor-opt`` keys of the ray executor."""

    address: str = field(default="", metadata={
        "help": "Ray cluster to connect to (host:port or ray://host:port); empty: a private local cluster "
                "started for this run and stopped after it"})
    num_cpus: float | None = field(default=None, metadata={
        "help": "CPUs the task asks Ray for (default: the recipe's resources.cpus, else 1)"})
    num_gpus: float | None = field(default=None, metadata={
        "help": "GPUs the task asks Ray for (default: the recipe's resources.gpus, else the detected devices "
                "of the plan's accelerator, none when it needs none)"})
    accelerator_type: str | None = field(default=None, metadata={
        "help": "Ray accelerator type the node must have, e.g. H100 (default: from the recipe's "
                "resources.accelerator or the plan's accelerator requirement; 'none' for no constraint)"})
    cluster_cpus: int | None = field(default=None, metadata={
        "help": "CPUs of the private local cluster (default: this machine's)"})
    env: tuple[str, ...] = field(default=(), metadata={
        "help": "names of this process's environment variables to pass to the far side, e.g. CMX_HOME,HF_HOME"})
    cmx: str = field(default="", metadata={
        "help": "how the node starts cmx, e.g. '/opt/venv/bin/cmx' (default: this Python with -m cmx_core)"})
    timeout_s: float | None = field(default=None, metadata={
        "help": "cancel the task after this many seconds (default: the recipe's resources.time, else none)"})
    storage: str = field(default="", metadata={
        "help": "a directory every node and this machine reach (shared storage): each run of the task works in "
                "it, so a run Ray starts again after losing one resumes from its checkpoints (default: none; a "
                "private directory on the node, and a retry starts over)"})
    max_result_mb: float = field(default=256.0, metadata={
        "help": "largest far run directory (result, logs, artifacts) the task may send back, in MB"})
