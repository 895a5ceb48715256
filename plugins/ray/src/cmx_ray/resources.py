"""What a plan asks of a Ray cluster: CPUs, GPUs, memory and the ``accelerator_type:<X>``
resource, on each of its nodes.

The settings win, then the plan's ``resources:`` (:mod:`cmx_core.recipes.resources`: ``cpus`` ->
``num_cpus``, ``gpus`` -> ``num_gpus``, ``memory`` -> ``memory`` in bytes, ``accelerator`` ->
``accelerator_type``, ``time`` -> the task's timeout), then what its requirements imply. A
Ray task is one process on one node: a plan asking for ``nodes: N`` runs as N tasks, one per
node (:mod:`cmx_ray.nodeset`), each starting its node's ranks with the recipe's launcher; a
plan asking for several tasks per node is refused with the executors that can run it.

Pure functions of the plan, the facts it was resolved against and the settings, so
``cmx plan`` can show and check them without starting anything."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cmx_core.api import UsageError, plan_resources

if TYPE_CHECKING:
    from cmx_core.api import Plan
    from cmx_ray.settings import RaySettings

RAY_ACCELERATOR = {
    "mi300x": "AMD-Instinct-MI300X-OAM", "mi250x": "AMD-Instinct-MI250X", "mi250": "AMD-Instinct-MI250X-MI250",
    "mi210": "AMD-Instinct-MI210", "mi100": "AMD-Instinct-MI100", "a10g": "A10G", "gaudi": "Intel-GAUDI",
}
"""cmx accelerator tags whose Ray name is not the upper-cased tag (``h100`` -> ``H100``,
Ray's ``ray.util.accelerators`` convention, which Ray detects from the GPU's name)."""

_COUNTED = re.compile(r"^(\d+)x(.+)$")


@dataclass(frozen=True)
class TaskResources:
    """The options the far task is submitted with."""

    num_cpus: float
    num_gpus: float
    accelerator_type: str | None
    accelerator_tag: str | None
    memory: int | None = None
    timeout_s: float | None = None
    nodes: int = 1
    """Tasks of the run, one per node, each asking for the resources above."""

    def ray_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.accelerator_type:
            options["accelerator_type"] = self.accelerator_type
        if self.memory:
            options["memory"] = self.memory
        return options

    def needs(self) -> dict[str, float]:
        """The cluster resources the task needs (what :func:`missing` checks)."""
        wanted = {"CPU": self.num_cpus}
        if self.num_gpus:
            wanted["GPU"] = self.num_gpus
        if self.memory:
            wanted["memory"] = float(self.memory)
        if self.accelerator_type:
            wanted[f"accelerator_type:{self.accelerator_type}"] = 0.001  # Ray's own request size
        return wanted


def plan_accelerator(plan: Plan) -> tuple[str | None, int]:
    """(accelerator tag, count) the plan requires: ``requires: {accelerator: h100}`` (count 1)
    or ``8xh100`` (count 8) on any node; (None, 0) when it needs none."""
    for node in plan.nodes:
        wanted = (node.requires or {}).get("accelerator")
        if isinstance(wanted, (list, tuple)):
            wanted = wanted[0] if wanted else None
        if wanted:
            counted = _COUNTED.match(str(wanted))
            if counted:
                return counted.group(2), int(counted.group(1))
            return str(wanted), 1
    return None, 0


def detected_devices(gpus: Any, tag: str) -> int:
    """How many devices of the ``gpus`` fact carry accelerator ``tag``."""
    devices = gpus.get("devices") if isinstance(gpus, Mapping) else None
    return sum(1 for d in devices or () if isinstance(d, Mapping)
               and (tag == d.get("accelerator_tag") or tag in (d.get("accelerator_tags") or ())))


def ray_accelerator_type(tag: str) -> str:
    """Ray's accelerator type for a cmx tag (``h100-sxm`` -> ``H100``)."""
    base = tag.split("-")[0]
    return RAY_ACCELERATOR.get(base, base.upper())


def task_resources(plan: Plan, settings: RaySettings, gpus_fact: Any) -> TaskResources:
    """The task's resources: the settings where given, else the plan's ``resources:``, else
    what its requirements need."""
    asked = plan_resources(plan.nodes)
    if (asked.tasks_per_node or 1) > 1:
        raise UsageError(f"ray executor: the plan asks for {asked.tasks_per_node} tasks per node (resources: in recipe "
                         f"{plan.root.recipe_name}), and a Ray task is one process on its node; use a launcher that "
                         "starts the node's ranks (launcher torchrun) or --executor slurm (srun)")
    tag, count = plan_accelerator(plan)
    tag = asked.accelerator or tag
    if settings.num_gpus is not None:
        if settings.num_gpus < 0:
            raise UsageError(f"ray executor option num_gpus={settings.num_gpus:g}: use 0 or more")
        num_gpus = settings.num_gpus
    elif asked.gpus is not None:
        num_gpus = float(asked.gpus)
    elif tag:
        num_gpus = float(max(count, detected_devices(gpus_fact, tag), 1))
    else:
        num_gpus = 0.0
    num_cpus = settings.num_cpus if settings.num_cpus is not None else float(asked.cpus or 1)
    if num_cpus <= 0:
        raise UsageError(f"ray executor option num_cpus={num_cpus:g}: use a number above 0")
    if settings.accelerator_type is not None:
        kind = None if settings.accelerator_type.lower() in ("", "none") else settings.accelerator_type
    else:
        kind = ray_accelerator_type(tag) if tag else None
    timeout = settings.timeout_s if settings.timeout_s is not None else asked.time_s
    return TaskResources(num_cpus, num_gpus, kind, tag, asked.memory_bytes, timeout, asked.nodes or 1)


def missing(needed: Mapping[str, float], cluster: Mapping[str, float]) -> list[str]:
    """What the cluster lacks, in words (empty when the task fits)."""
    gaps = []
    for key, amount in needed.items():
        have = float(cluster.get(key, 0.0))
        if have < amount:
            what = key.split(":", 1)[1] if key.startswith("accelerator_type:") else key
            gaps.append(f"accelerator type {what} (no node has it)" if key.startswith("accelerator_type:")
                        else f"{amount:g} bytes of memory (the cluster has {have:g})" if key == "memory"
                        else f"{amount:g} {what} (the cluster has {have:g})")
    return gaps
