"""What a job asks Slurm for, from the plan and the settings, as sbatch arguments.

Three sources, the first that says something wins: the executor settings
(``--executor-opt``), the plan's ``resources:`` (:mod:`cmx_core.recipes.resources`: ``nodes`` ->
``--nodes``, ``tasks_per_node`` -> ``--ntasks-per-node``, ``cpus`` -> ``--cpus-per-task``,
``memory`` -> ``--mem`` in MiB, ``time`` -> ``--time`` in minutes, ``gpus`` -> ``--gres=gpu:N``,
``accelerator`` -> ``--constraint``), then what the plan's requirements imply: an accelerator
requirement (``requires: {accelerator: h100}`` on any node) becomes a GPU request and
``--constraint=h100``; a ``gpus.count`` requirement sets the count.

The ``nodes`` setting places the recipe's ranks: a recipe with ``nodes: 2`` run with
``nodes=1`` keeps its two ranks (``--nodes=1 --ntasks=2``) on the one node. Each setting is
checked here, so a bad value is a one-line usage error naming the option, before anything is
submitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cmx_core.api import NO_RESOURCES
from cmx_core.api import Resources as Asked
from cmx_core.errors import UsageError
from cmx_slurm.settings import SlurmSettings

_MEM = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_GPUS = re.compile(r"^([A-Za-z0-9_.-]+:)?\d+$")
_NAME = re.compile(r"^[A-Za-z0-9_.,:+-]+$")
_OWNED = ("--output", "--error", "--parsable", "--array", "--wrap", "--nodes", "--ntasks", "--ntasks-per-node",
          "-o", "-e", "-N", "-n")
"""sbatch options this executor sets itself: extra arguments may not change them."""


@dataclass(frozen=True)
class Resources:
    """The allocation of one job (per array task, for an array)."""

    nodes: int = 1
    ntasks_per_node: int = 1
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    gpus: str | None = None
    gpu_request: str = "gres"
    gres: str | None = None
    constraint: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    extra: tuple[str, ...] = ()
    world: int | None = None
    """A task count spread over ``nodes`` (``--ntasks``) instead of ``ntasks_per_node``."""

    @property
    def ntasks(self) -> int:
        """WORLD_SIZE: every task of every node."""
        return self.world if self.world is not None else self.nodes * self.ntasks_per_node

    def sbatch_args(self) -> list[str]:
        """The sbatch arguments (an argument list: nothing here reaches a shell)."""
        tasks = f"--ntasks={self.world}" if self.world is not None else f"--ntasks-per-node={self.ntasks_per_node}"
        args = [f"--nodes={self.nodes}", tasks]
        for flag, value in (("--cpus-per-task", self.cpus_per_task), ("--mem", self.mem), ("--time", self.time),
                            ("--constraint", self.constraint), ("--partition", self.partition),
                            ("--account", self.account), ("--qos", self.qos)):
            if value is not None:
                args.append(f"{flag}={value}")
        if self.gres:
            args.append(f"--gres={self.gres}")
        elif self.gpus and self.gpus.rsplit(":", 1)[-1] != "0":
            args.append(f"--gres=gpu:{self.gpus}" if self.gpu_request == "gres" else f"--gpus-per-node={self.gpus}")
        return [*args, *self.extra]

    def describe(self) -> dict[str, Any]:
        """What ``cmx plan`` prints under ``executor:``."""
        return {"nodes": self.nodes, "tasks": self.ntasks, "sbatch": " ".join(self.sbatch_args())}


def plan_resources(requires: Iterable[Mapping[str, Any]], settings: SlurmSettings,
                   asked: Asked = NO_RESOURCES) -> Resources:
    """The job's resources: the settings, else the plan's ``resources:`` (``asked``), else
    what the plan's requirements imply."""
    accelerator, count = _wanted(requires)
    accelerator = asked.accelerator or accelerator
    if settings.gpus is not None:
        gpus: str | None = settings.gpus
    elif asked.gpus is not None:
        gpus = str(asked.gpus)
    else:
        gpus = str(count or 1) if accelerator or count else None
    constraint = settings.constraint if settings.constraint is not None else accelerator
    nodes = _first(settings.nodes, asked.nodes, 1)
    world = asked.world_size if settings.ntasks_per_node is None and asked.world_size > nodes \
        and nodes != (asked.nodes or 1) else None
    resources = Resources(
        nodes=nodes, ntasks_per_node=_first(settings.ntasks_per_node, asked.tasks_per_node, 1),
        cpus_per_task=settings.cpus_per_task if settings.cpus_per_task is not None else asked.cpus,
        mem=settings.mem or (f"{asked.memory_mib}M" if asked.memory_mib else None),
        time=settings.time or (str(asked.time_minutes) if asked.time_minutes else None), gpus=gpus,
        gpu_request=settings.gpu_request, gres=settings.gres, constraint=constraint or None,
        partition=settings.partition, account=settings.account, qos=settings.qos,
        extra=tuple(settings.sbatch_args), world=world,
    )
    check(resources)
    return resources


def _first(setting: int | None, asked: int | None, default: int) -> int:
    return setting if setting is not None else asked if asked is not None else default


def _wanted(requires: Iterable[Mapping[str, Any]]) -> tuple[str | None, int | None]:
    """(accelerator tag, GPU count) the plan's nodes require, if any."""
    accelerator: str | None = None
    count: int | None = None
    for node in requires:
        value = node.get("accelerator")
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value and accelerator is None:
            accelerator = str(value)
        wanted = node.get("gpus.count")
        if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted > 0:
            count = max(count or 0, wanted)
    return accelerator, count


def check(resources: Resources) -> None:
    """Refuse a value sbatch would refuse (or misread), naming the option and the fix."""
    for key, count in (("nodes", resources.nodes), ("ntasks_per_node", resources.ntasks_per_node),
                       ("ntasks", resources.world),
                       ("cpus_per_task", resources.cpus_per_task)):
        if count is not None and count < 1:
            raise _bad(key, count, "use a whole number of at least 1")
    rules = (("mem", resources.mem, _MEM, "use a size such as 16G or 4096M"),
             ("time", resources.time, _TIME, "use minutes or [days-]hours:minutes:seconds, e.g. 30 or 1:00:00"),
             ("gpus", resources.gpus, _GPUS, "use a count or type:count, e.g. 2 or a100:2"),
             ("gres", resources.gres, _NAME, "use a gres list such as gpu:2 or gpu:a100:1"),
             ("constraint", resources.constraint, re.compile(r"^[A-Za-z0-9_.&|\[\]*:!-]+$"),
              "use node features such as h100 or h100|a100"),
             ("partition", resources.partition, _NAME, "use a partition name from sinfo"),
             ("account", resources.account, _NAME, "use an account name from sacctmgr"),
             ("qos", resources.qos, _NAME, "use a QOS name"))
    for key, value, pattern, fix in rules:
        if value is not None and not pattern.match(value):
            raise _bad(key, value, fix)
    for arg in resources.extra:
        if not arg.startswith("--"):
            raise _bad("sbatch_args", arg, "give each as --key=value, comma separated")
        if arg.split("=", 1)[0] in _OWNED:
            raise _bad("sbatch_args", arg, f"{arg.split('=', 1)[0]} is set by the executor (use nodes, "
                                           "ntasks_per_node or the run's own directories)")


def _bad(key: str, value: object, fix: str) -> UsageError:
    return UsageError(f"slurm executor option {key}={value!r}: {fix}")
