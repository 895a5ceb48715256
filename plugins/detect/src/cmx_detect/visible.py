"""What a job can use: the node's GPUs narrowed by ``CUDA_VISIBLE_DEVICES`` (NVIDIA) or
``ROCR_VISIBLE_DEVICES`` then ``HIP_VISIBLE_DEVICES`` (AMD; ``CUDA_VISIBLE_DEVICES`` stands in
for an unset ``HIP_VISIBLE_DEVICES``, as HIP reads it too).

Entries are node indices, GPU UUIDs (a unique prefix is enough, as CUDA accepts) or MIG
UUIDs (``MIG-<uuid>``, or R450's ``MIG-GPU-<uuid>/<gi>/<ci>``). As in CUDA, the list ends at
the first entry that names no device; the rest is reported as ignored. A MIG UUID selects
that MIG device of its GPU. Indices are the node's (nvidia-smi/NVML order, i.e.
``CUDA_DEVICE_ORDER=PCI_BUS_ID``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from cmx_detect.facts import GpuDevice, GpuFacts, VisibleDevices

_OLD_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$")


def restrict(gpus: GpuFacts, env: Callable[[str], str | None]) -> GpuFacts:
    """``gpus`` as a job started with this environment sees them; unchanged without a variable."""
    if gpus.source in {"rocm-smi", "amd-smi"}:
        for var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
            value = env(var) if var != "HIP_VISIBLE_DEVICES" else env(var) or env("CUDA_VISIBLE_DEVICES")
            if value is not None:
                gpus = _apply(gpus, var, value)
        return gpus
    value = env("CUDA_VISIBLE_DEVICES")
    return gpus if value is None else _apply(gpus, "CUDA_VISIBLE_DEVICES", value)


def _apply(gpus: GpuFacts, var: str, value: str) -> GpuFacts:
    chosen: dict[int, GpuDevice] = {}
    migs: list[str] = []
    entries = [e.strip() for e in value.split(",")] if value.strip() else []
    ignored: list[str] = []
    for pos, entry in enumerate(entries):
        found = _select(gpus.devices, entry)
        if found is None:
            ignored = [e for e in entries[pos:] if e]
            break
        node = next(d for d in gpus.devices if d.index == found.index)
        if found.mig_devices != node.mig_devices:  # a MIG UUID picked one slice
            migs += [m.uuid for m in found.mig_devices if m.uuid]
            before = chosen.get(found.index)
            slices = [*(before.mig_devices if before and before.mig_devices != node.mig_devices else []),
                      *found.mig_devices]
            chosen[found.index] = replace(found, mig_devices=slices)
        else:
            chosen.setdefault(found.index, found)
    devices = list(chosen.values())
    visible = VisibleDevices(variable=var, value=value, indices=[d.index for d in devices], mig_uuids=migs,
                             ignored=ignored)
    reason = gpus.reason
    if not devices and gpus.devices:
        reason = f"{var}={value!r} leaves no device of the {len(gpus.devices)} on this node"
    return replace(gpus, devices=devices, visible=visible, reason=reason)


def _select(devices: list[GpuDevice], entry: str) -> GpuDevice | None:
    if re.fullmatch(r"\d+", entry):
        return next((d for d in devices if d.index == int(entry)), None)
    old = _OLD_MIG.match(entry)
    if old:
        gpu = next((d for d in devices if (d.uuid or "").lower() == old.group(1).lower()), None)
        keep = [m for m in gpu.mig_devices if (m.gpu_instance_id, m.compute_instance_id)
                == (int(old.group(2)), int(old.group(3)))] if gpu else []
        return replace(gpu, mig_devices=keep) if gpu and keep else None
    if entry.upper().startswith("MIG-"):
        for dev in devices:
            keep = [m for m in dev.mig_devices if m.uuid and m.uuid.lower() == entry.lower()]
            if keep:
                return replace(dev, mig_devices=keep)
        return None
    matches = [d for d in devices if d.uuid and d.uuid.lower().startswith(entry.lower())]
    return matches[0] if len(matches) == 1 else None
