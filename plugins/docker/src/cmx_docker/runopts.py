"""``docker run`` options for a plan: user, mounts, network, GPUs, resource limits.

Built from the template's ``run:`` defaults, what the plan needs (an accelerator requirement
means GPUs) and the executor options (``--executor-opt KEY=VALUE`` style mapping), then
turned into keyword arguments of the SDK's ``containers.run`` by :meth:`RunOptions.sdk_kwargs`
(kept separate so GPU options can be asserted on machines without GPUs).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmx_core.errors import UsageError
from cmx_docker.templates import RunDefaults

_SIZE = re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE)
OPTION_KEYS = ("memory", "cpus", "pids", "shm_size", "network", "gpus", "timeout_s", "user")


@dataclass(frozen=True)
class Mount:
    """A bind mount (host path == container path, so recorded paths stay valid on both)."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class RunOptions:
    image: str
    command: tuple[str, ...]
    user: str
    mounts: tuple[Mount, ...]
    environment: Mapping[str, str]
    network: bool = False
    gpus: str | None = None          # None: no GPUs; "all" or a count "2" or ids "0,1"
    memory: str | None = None
    cpus: float | None = None
    pids: int | None = None
    shm_size: str | None = None
    timeout_s: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    init: bool = True               # an init as PID 1 reaps the benchmark's children
    cdi_devices: tuple[str, ...] = ()
    """Podman's GPUs: CDI device names (``nvidia.com/gpu=all``) instead of device requests."""

    def device_requests(self) -> list[dict[str, Any]]:
        """The Engine API's ``DeviceRequests`` for :attr:`gpus` (what ``--gpus`` sends)."""
        if not self.gpus or self.cdi_devices:
            return []
        request: dict[str, Any] = {"Driver": "", "Capabilities": [["gpu"]], "Options": {}}
        if self.gpus == "all":
            request.update(Count=-1, DeviceIDs=None)
        elif self.gpus.isdigit():
            request.update(Count=int(self.gpus), DeviceIDs=None)
        else:
            request.update(Count=0, DeviceIDs=[d.strip() for d in self.gpus.split(",")])
        return [request]

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``DockerClient.containers.run`` / ``create``."""
        from docker.types import DeviceRequest  # deferred: docker only when this runs (203 modules)

        kwargs: dict[str, Any] = {
            "image": self.image, "command": list(self.command), "user": self.user,
            "environment": dict(self.environment), "labels": dict(self.labels),
            "volumes": {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
                        for m in self.mounts},
            "network_mode": "host" if self.network else "none",
            "working_dir": "/tmp", "detach": True, "init": self.init,
        }
        if self.cdi_devices:
            kwargs["devices"] = list(self.cdi_devices)
        if self.memory:
            kwargs["mem_limit"] = self.memory
            kwargs["memswap_limit"] = self.memory  # no swap beyond the limit: OOM is an OOM
        if self.cpus:
            kwargs["nano_cpus"] = int(self.cpus * 1e9)
        if self.pids:
            kwargs["pids_limit"] = self.pids
        if self.shm_size:
            kwargs["shm_size"] = self.shm_size
        requests = self.device_requests()
        if requests:
            kwargs["device_requests"] = [
                DeviceRequest(driver=r["Driver"], count=r["Count"], device_ids=r["DeviceIDs"],
                              capabilities=r["Capabilities"], options=r["Options"])
                for r in requests]
        return kwargs


def merge(defaults: RunDefaults, options: Mapping[str, Any], needs_gpu: bool,
          needs_network: bool) -> dict[str, Any]:
    """Template defaults, overridden by executor options; GPUs when the plan needs them."""
    unknown = set(options) - set(OPTION_KEYS) - {"container", "template", "rebuild"}
    if unknown:
        raise UsageError(f"docker executor: unknown option(s) {sorted(unknown)}; "
                         f"known: {', '.join(OPTION_KEYS)}, container, rebuild")
    gpus = options.get("gpus")
    if gpus is None:
        gpus = "all" if (needs_gpu or defaults.gpus) else None
    values = {
        "network": as_bool(options.get("network", defaults.network or needs_network), "network"),
        "gpus": None if gpus in (None, "", "none", "0", 0, False) else str(gpus),
        "memory": _size(options.get("memory", defaults.memory), "memory"),
        "shm_size": _size(options.get("shm_size", defaults.shm_size), "shm_size"),
        "cpus": _float(options.get("cpus", defaults.cpus), "cpus"),
        "pids": _count(options.get("pids", defaults.pids), "pids"),
        "timeout_s": _float(options.get("timeout_s", defaults.timeout_s), "timeout_s"),
    }
    return values


_USER = re.compile(r"^[1-9]\d*:[1-9]\d*$")


def container_user(option: Any) -> str:
    """The host user's uid:gid when it is not root, else the image's non-root ``cmx`` user;
    an explicit ``user`` must be a non-root ``uid:gid``."""
    if option:
        if not _USER.match(str(option)):
            raise UsageError(f"docker executor option user={option!r}: use a non-root uid:gid like 1000:1000")
        return str(option)
    uid, gid = os.getuid(), os.getgid()
    return f"{uid}:{gid}" if uid != 0 else "1000:1000"


def as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"docker executor option {key}={value!r}: use true or false")


def _size(value: Any, key: str) -> str | None:
    if value in (None, ""):
        return None
    text = str(value).strip().lower()
    if not _SIZE.match(text):
        raise UsageError(f"docker executor option {key}={value!r}: use a size like 512m or 8g")
    return text


def _count(value: Any, key: str) -> int | None:
    number = _float(value, key)
    if number is not None and number != int(number):
        raise UsageError(f"docker executor option {key}={value!r}: use a whole number")
    return None if number is None else int(number)


def _float(value: Any, key: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"docker executor option {key}={value!r}: use a number") from None
    if number <= 0:
        raise UsageError(f"docker executor option {key}={value!r}: must be > 0")
    return number
