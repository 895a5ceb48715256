"""How a GPU request reaches the engine, or why it cannot.

* Docker: a ``DeviceRequests`` entry (what ``docker run --gpus`` sends) needs the NVIDIA
  runtime, which the engine lists under ``Runtimes`` in ``/info``.
* Podman: GPUs are CDI devices (``--device nvidia.com/gpu=all``), which need a CDI spec for
  ``nvidia.com/gpu`` under ``/etc/cdi`` or ``/var/run/cdi`` (``nvidia-ctk cdi generate``).

Without either the request is refused at plan time (``check_plan``) with the reason, so a
container is never started without the GPUs the plan asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_docker.engine import Endpoint, api_get

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
CDI_KIND = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuRoute:
    """``device_requests`` (Docker's NVIDIA runtime) or ``cdi_devices`` (Podman's CDI names)."""

    kind: str  # "device-requests" | "cdi"
    cdi_devices: tuple[str, ...] = ()


def cdi_devices(gpus: str, dirs: Iterable[Path] = CDI_DIRS) -> tuple[str, ...] | None:
    """The CDI device names for ``gpus`` (``all``, a count or ids) when a CDI spec of
    ``nvidia.com/gpu`` exists in ``dirs``; None when there is none."""
    names = _cdi_names(dirs)
    if not names:
        return None
    if gpus == "all":
        return (f"{CDI_KIND}=all",) if "all" in names else tuple(f"{CDI_KIND}={n}" for n in sorted(names))
    if gpus.isdigit():
        indices = sorted((n for n in names if n.isdigit()), key=int)[: int(gpus)]
        if len(indices) < int(gpus):
            raise UsageError(f"gpus={gpus}: the CDI spec lists {len(indices)} numbered GPU(s) ({CDI_KIND}=0...)")
        return tuple(f"{CDI_KIND}={n}" for n in indices)
    wanted = [g.strip() for g in gpus.split(",") if g.strip()]
    missing = [g for g in wanted if g not in names]
    if missing:
        raise UsageError(f"gpus={gpus}: no CDI device {CDI_KIND}={missing[0]} (known: {', '.join(sorted(names))})")
    return tuple(f"{CDI_KIND}={g}" for g in wanted)


def _cdi_names(dirs: Iterable[Path]) -> set[str]:
    """Device names of every ``nvidia.com/gpu`` CDI spec (JSON or YAML) in ``dirs``."""
    import yaml  # deferred: yaml only when this runs (20 modules)

    names: set[str] = set()
    for folder in dirs:
        for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            try:
                doc = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
            except (OSError, ValueError, yaml.YAMLError):
                continue
            if isinstance(doc, dict) and doc.get("kind") == CDI_KIND:
                names.update(str(d.get("name")) for d in doc.get("devices") or () if isinstance(d, dict))
    return names


def route(endpoint: Endpoint, gpus: str, dirs: Iterable[Path] = CDI_DIRS) -> GpuRoute:
    """How ``gpus`` reaches ``endpoint``'s containers; a UsageError saying why it cannot."""
    if endpoint.kind == "podman":
        devices = cdi_devices(gpus, dirs)
        if devices is None:
            raise UsageError(f"GPUs requested (gpus={gpus}) but {endpoint.runtime} at {endpoint.url} has no CDI "
                             f"spec for {CDI_KIND} under {' or '.join(map(str, dirs))}; generate one with "
                             "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, or run with gpus=none")
        return GpuRoute("cdi", devices)
    status, info = api_get(endpoint.url, "/info")
    runtimes = sorted((info or {}).get("Runtimes") or {}) if status == 200 and isinstance(info, dict) else []
    if "nvidia" not in runtimes:
        raise UsageError(f"GPUs requested (gpus={gpus}) but {endpoint.runtime} at {endpoint.url} has no NVIDIA "
                         f"runtime (runtimes: {', '.join(runtimes) or 'none'}); install nvidia-container-toolkit "
                         "and run `nvidia-ctk runtime configure --runtime=docker`, or run with gpus=none")
    return GpuRoute("device-requests")
