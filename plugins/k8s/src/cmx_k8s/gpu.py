"""The GPUs a plan asks a cluster for: the extended resource (``nvidia.com/gpu`` or
``amd.com/gpu``), the count and the product label the node must carry.

The label is the one NVIDIA's GPU feature discovery puts on nodes, ``nvidia.com/gpu.product``,
whose value is the device name with dashes for spaces (``NVIDIA H100 80GB HBM3`` ->
``NVIDIA-H100-80GB-HBM3``); AMD's node labeller's is ``amd.com/gpu.product-name``. The name
comes from the facts the plan was resolved against (a facts file, or this machine), so an
8xH100 facts file gives 8 GPUs on ``NVIDIA-H100-80GB-HBM3``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmx_core.api import Plan

_COUNTED = re.compile(r"^(\d+)x(.+)$")
_AMD_TAGS = ("mi300x", "mi300a", "mi325x", "mi250x", "mi250", "mi210", "mi100")
PRODUCT_LABEL = {"nvidia": "nvidia.com/gpu.product", "amd": "amd.com/gpu.product-name"}
RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


@dataclass(frozen=True)
class GpuRequest:
    """What the pod asks for: ``count`` of ``resource`` on nodes labelled ``label=product``."""

    tag: str
    count: int
    vendor: str
    product: str | None

    @property
    def resource(self) -> str:
        return RESOURCE[self.vendor]

    @property
    def label(self) -> str:
        return PRODUCT_LABEL[self.vendor]


def plan_accelerator(plan: Plan) -> tuple[str | None, int]:
    """(tag, count) the plan requires (``h100`` -> 1, ``8xh100`` -> 8); (None, 0) for none."""
    for node in plan.nodes:
        wanted = (node.requires or {}).get("accelerator")
        if isinstance(wanted, (list, tuple)):
            wanted = wanted[0] if wanted else None
        if wanted:
            counted = _COUNTED.match(str(wanted))
            return (counted.group(2), int(counted.group(1))) if counted else (str(wanted), 1)
    return None, 0


def label_value(name: str) -> str:
    """A device name as a label value (``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-._")[:63]


def gpu_request(plan: Plan, gpus_fact: Any, count: int | None = None, product: str | None = None,
                accelerator: str | None = None) -> GpuRequest | None:
    """The request for the plan's accelerator (``accelerator``: the recipe's
    ``resources.accelerator``, which comes first); None when it needs none and no count is given."""
    tag, needed = plan_accelerator(plan)
    if accelerator:
        tag, needed = accelerator, needed or 1
    devices = [d for d in _devices(gpus_fact) if tag and (tag == d.get("accelerator_tag")
                                                          or tag in (d.get("accelerator_tags") or ()))]
    if tag is None and not count:
        return None
    vendor = str(devices[0].get("vendor") or "nvidia") if devices else \
        ("amd" if tag and tag.split("-")[0] in _AMD_TAGS else "nvidia")
    vendor = vendor if vendor in RESOURCE else "nvidia"
    chosen = count if count is not None else max(needed, len(devices), 1)
    found = label_value(str(devices[0]["name"])) if devices and devices[0].get("name") else None
    return GpuRequest(tag or "gpu", chosen, vendor, product or found)


def _devices(gpus: Any) -> list[Mapping[str, Any]]:
    devices = gpus.get("devices") if isinstance(gpus, Mapping) else None
    return [d for d in devices or () if isinstance(d, Mapping)]
