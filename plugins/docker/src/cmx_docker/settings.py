"""The docker executor's settings (imported when the plugin registers: keep it light)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from cmx_core.api import ExecutorSettings

RUN_OPTION_KEYS = ("memory", "cpus", "pids", "shm_size", "network", "gpus", "timeout_s", "user")
"""The settings that override the template's run defaults (see :mod:`cmx_docker.runopts`)."""


@dataclass(frozen=True)
class DockerSettings(ExecutorSettings):
    """``--executor-opt`` keys of the docker executor (defaults come from the template)."""

    container: str | None = field(default=None, metadata={
        "help": "container template (default: the recipe's container:, else python)"})
    rebuild: bool = field(default=False, metadata={"help": "build the image again without the layer cache"})
    network: bool | None = field(default=None, metadata={
        "help": "give the container the host network (default: only when a step type needs it)"})
    gpus: str | None = field(default=None, metadata={
        "help": "GPUs to request: all, a count, or none (default: all when the plan needs an accelerator)"})
    memory: str | None = field(default=None, metadata={"help": "memory limit, e.g. 8g"})
    shm_size: str | None = field(default=None, metadata={"help": "/dev/shm size, e.g. 16g"})
    cpus: float | None = field(default=None, metadata={"help": "CPU limit, e.g. 2"})
    pids: int | None = field(default=None, metadata={"help": "process/thread limit, e.g. 4096"})
    timeout_s: float | None = field(default=None, metadata={"help": "kill the container after this many seconds"})
    user: str | None = field(default=None, metadata={
        "help": "uid:gid to run as (default: yours, or 1000:1000 for root)"})

    def run_overrides(self) -> dict[str, Any]:
        """The run options the user set (None means: the template's default)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in RUN_OPTION_KEYS and getattr(self, f.name) is not None}
