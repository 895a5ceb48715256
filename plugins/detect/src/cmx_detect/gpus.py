"""The ``gpus`` and ``accelerator`` facts: NVIDIA first, then AMD; overrides applied last."""

from __future__ import annotations

import os
from dataclasses import replace

from cmx_detect.amd import detect_amd
from cmx_detect.facts import GpuFacts
from cmx_detect.nvidia import detect_nvidia
from cmx_detect.source import Source
from cmx_detect.tags import accelerator_list, mig_tags, override_accelerators, parse_override
from cmx_detect.visible import restrict

OVERRIDE_ACCELERATOR = "CMX_OVERRIDE_ACCELERATOR"


def detect_gpus(src: Source) -> GpuFacts:
    """Every GPU, with the reason when there are none. Never raises for missing hardware."""
    nvidia = detect_nvidia(src)
    if nvidia.devices:
        return nvidia
    amd = detect_amd(src)
    if amd is None:
        return nvidia
    if amd.devices:
        return replace(amd, notes=[f"NVIDIA: {nvidia.reason}", *amd.notes])
    return replace(nvidia, reason=f"{nvidia.reason}; AMD: {amd.reason}")


def accelerator_from(gpus: GpuFacts) -> list[str]:
    """The ``accelerator`` fact of the GPUs a job sees: ``["h100", "h100-sxm", "8xh100"]``. A GPU
    in MIG mode counts as its MIG devices (``a100-mig-2g.20gb`` ... ``4xa100-mig-2g.20gb``)."""
    per_device: list[list[str]] = []
    for dev in gpus.devices:
        if dev.mig_mode == "enabled" and dev.mig_devices:
            per_device += [mig_tags(dev.accelerator_tags, m.profile) for m in dev.mig_devices]
        else:
            per_device.append(dev.accelerator_tags)
    return accelerator_list(per_device)


def visible_gpus(src: Source, node: GpuFacts) -> GpuFacts:
    """The node's GPUs narrowed to those this process's environment lets a job use."""
    return restrict(node, src.env)


def detect_accelerator(src: Source, gpus: GpuFacts | None = None) -> list[str]:
    """Tags present on the machine; ``CMX_OVERRIDE_ACCELERATOR`` (``h100``, ``8xh100``,
    empty for none) replaces them, in the spirit of conda's ``CONDA_OVERRIDE_CUDA``."""
    override = os.environ.get(OVERRIDE_ACCELERATOR)
    if override is not None:
        return override_accelerators(parse_override(override))
    return accelerator_from(gpus if gpus is not None else visible_gpus(src, detect_gpus(src)))
