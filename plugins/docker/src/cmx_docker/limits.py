"""The limits a container really got, read back from the engine (``HostConfig``) after it
started, for the result's ``system.container.limits``: what was asked is not evidence of
what was applied (an engine may round, ignore or refuse a limit)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class AppliedLimits:
    """Memory, CPUs, processes, /dev/shm and GPUs as the engine applied them; None: no limit."""

    memory_bytes: int | None
    cpus: float | None
    pids: int | None
    shm_bytes: int | None
    gpus: str | None

    def as_fact(self) -> dict[str, Any]:
        return asdict(self)


def applied_limits(host_config: Mapping[str, Any], cdi_gpus: str | None = None) -> AppliedLimits:
    """The limits in an inspected container's ``HostConfig`` (0 and -1 mean none there);
    ``cdi_gpus``: the GPUs asked for as Podman CDI devices, which live in ``Devices``."""
    cpus: float | None = _positive(host_config.get("NanoCpus"))
    quota, period = _positive(host_config.get("CpuQuota")), _positive(host_config.get("CpuPeriod"))
    if cpus is None and quota and period:
        cpus = quota / period * 1e9
    return AppliedLimits(memory_bytes=_positive(host_config.get("Memory")),
                         cpus=round(cpus / 1e9, 6) if cpus else None,
                         pids=_positive(host_config.get("PidsLimit")),
                         shm_bytes=_positive(host_config.get("ShmSize")),
                         gpus=_gpus(host_config.get("DeviceRequests")) or (cdi_gpus if host_config.get("Devices")
                                                                            else None))


def _positive(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _gpus(requests: Any) -> str | None:
    """``all``, a count or the device ids of the GPU device request, if any."""
    for request in requests or ():
        capabilities = [c for group in request.get("Capabilities") or () for c in group or ()]
        if "gpu" not in capabilities:
            continue
        ids = request.get("DeviceIDs") or []
        if ids:
            return ",".join(str(i) for i in ids)
        count = request.get("Count")
        return "all" if count == -1 else str(count)
    return None
