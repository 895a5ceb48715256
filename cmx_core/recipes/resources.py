"""A recipe's ``resources:`` section: what one run of it needs from a scheduler.

    resources:
      nodes: 2            # machines (ranks on separate nodes), default 1
      tasks_per_node: 1   # ranks per machine; WORLD_SIZE = nodes x tasks_per_node
      cpus: 8             # CPUs per task
      gpus: 8             # GPUs per node
      memory: 64G         # memory per node (K, M, G, T; binary units; Gi and GB read the same)
      time: 2h            # time limit: seconds, or 30s, 10m, 2h, 1d
      accelerator: h100   # the accelerator tag the nodes must carry (a GPU request and a constraint)

A variation may carry its own ``resources:`` (``8xh100: {resources: {gpus: 8}}``): its keys
replace the recipe's when it is selected. Every key is optional and unset means "the
executor's default". The local executor ignores the section (the resolver already checked
this machine against ``requires:``); the Slurm, Ray and Kubernetes executors turn it into
their own requests, and their ``--executor-opt`` settings override it.

:func:`parse_resources` checks the plain data once, at load time (``cmx_core.recipes.check``
turns its :class:`ResourceError` into a file:line:key error); :func:`node_resources` and
:func:`plan_resources` give what a plan node and a whole plan ask for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cmx_core.recipes.durations import parse_duration

RESOURCE_KEYS = ("nodes", "tasks_per_node", "cpus", "gpus", "memory", "time", "accelerator")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT])(?:iB|i|B)?$", re.IGNORECASE)
_UNIT = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_ACCELERATOR = re.compile(r"^[a-z][a-z0-9._-]*$")
MIB = 1 << 20


class ResourceError(ValueError):
    """A bad ``resources:`` value: ``key`` (None: the section itself) and what to write instead."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


@dataclass(frozen=True)
class Resources:
    """What a run asks for; None is "not asked" (the executor's default)."""

    nodes: int | None = None
    tasks_per_node: int | None = None
    cpus: int | None = None
    gpus: int | None = None
    memory_bytes: int | None = None
    time_s: float | None = None
    accelerator: str | None = None

    @property
    def world_size(self) -> int:
        """Every rank of every node."""
        return (self.nodes or 1) * (self.tasks_per_node or 1)

    @property
    def memory_mib(self) -> int | None:
        """The memory in whole MiB, rounded up (Slurm's ``--mem=NM``, a Kubernetes ``NMi``)."""
        return None if self.memory_bytes is None else math.ceil(self.memory_bytes / MIB)

    @property
    def time_minutes(self) -> int | None:
        """The time limit in whole minutes, rounded up (Slurm's ``--time``)."""
        return None if self.time_s is None else max(1, math.ceil(self.time_s / 60))

    def over(self, base: Resources) -> Resources:
        """These values where set, else ``base``'s."""
        return replace(base, **self.asked())

    def asked(self) -> dict[str, Any]:
        """The keys that are set (for ``cmx plan`` and the records)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


NO_RESOURCES = Resources()


def parse_resources(data: Any) -> Resources:
    """The section as :class:`Resources`; a :class:`ResourceError` naming the key and the fix."""
    if data is None:
        return NO_RESOURCES
    if not isinstance(data, Mapping):
        raise ResourceError(None, f"expected a mapping of {', '.join(RESOURCE_KEYS)}, got {type(data).__name__}")
    for key in data:
        if key not in RESOURCE_KEYS:
            raise ResourceError(str(key), f"unknown key '{key}' (expected one of: {', '.join(RESOURCE_KEYS)})")
    return Resources(
        nodes=_count(data, "nodes", 1), tasks_per_node=_count(data, "tasks_per_node", 1),
        cpus=_count(data, "cpus", 1), gpus=_count(data, "gpus", 0),
        memory_bytes=_memory(data.get("memory")), time_s=_time(data.get("time")),
        accelerator=_accelerator(data.get("accelerator")),
    )


def _count(data: Mapping[str, Any], key: str, least: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ResourceError(key, f"expected a whole number of at least {least}, got {value!r}")
    return value


def _memory(value: Any) -> int | None:
    if value is None:
        return None
    match = _MEMORY.match(str(value).strip()) if not isinstance(value, bool) else None
    if match is None or float(match.group(1)) <= 0:
        raise ResourceError("memory", f"expected a size such as 512M, 16G or 1T, got {value!r}")
    return math.ceil(float(match.group(1)) * _UNIT[match.group(2).upper()])


def _time(value: Any) -> float | None:
    if value is None:
        return None
    seconds = parse_duration(value) if not isinstance(value, bool) else None
    if seconds is None or seconds <= 0:
        raise ResourceError("time", f"expected a duration such as 90, 30m, 2h or 1d, got {value!r}")
    return seconds


def _accelerator(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ACCELERATOR.match(value):
        raise ResourceError("accelerator", f"expected an accelerator tag such as h100 or mi300x, got {value!r} "
                                           "(a count goes in gpus:, e.g. gpus: 8)")
    return value


def node_resources(node: Any) -> Resources:
    """What a plan node asks for: its recipe's section with its selected variations' over it."""
    recipe = node.recipe
    chosen: Resources = recipe.resources
    for name, value in (node.variations or {}).items():
        spec = recipe.variations.get(name) or recipe.variations.get(f"{name}.#")
        if spec is not None:
            chosen = spec.resources.over(chosen)
            if spec.value_keys:  # nodes.#: {resources: {nodes: "#"}} selected as nodes.2
                taken = int(value) if str(value).isdigit() else value
                chosen = parse_resources({key: taken for key in spec.value_keys}).over(chosen)
    return chosen


def plan_resources(nodes: Iterable[Any]) -> Resources:
    """What a whole plan asks for: per key the largest any node asks (the first accelerator
    named), since one job runs every node of the plan."""
    merged = NO_RESOURCES
    for node in nodes:
        wanted = node_resources(node)
        merged = Resources(
            **{key: _larger(getattr(merged, key), getattr(wanted, key))
               for key in ("nodes", "tasks_per_node", "cpus", "gpus", "memory_bytes", "time_s")},
            accelerator=merged.accelerator or wanted.accelerator)
    return merged


def _larger(first: Any, second: Any) -> Any:
    if first is None:
        return second
    return first if second is None else max(first, second)


__all__ = ["NO_RESOURCES", "RESOURCE_KEYS", "ResourceError", "Resources", "node_resources", "parse_resources",
           "plan_resources"]
