"""cmx-core's minimal detectors (os, cpu, memory, python, host, container).

Plain functions in an import-light module: the warm-run replay (:mod:`cmx_core.run.replay`)
calls the uncached ones again, by reference, without loading any plugin.
"""

from __future__ import annotations

import os
import platform
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def detect_os() -> dict[str, Any]:
    info = _os_release()
    libc_name, libc_version = platform.libc_ver()
    return {
        "name": platform.system().lower(),
        "distro": info.get("NAME", ""),
        "version": info.get("VERSION_ID", ""),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "libc": f"{libc_name} {libc_version}".strip(),
    }


def _os_release() -> dict[str, str]:
    try:
        text = _read("/etc/os-release")
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {k: v.strip().strip('"') for k, v in pairs}


def detect_cpu() -> dict[str, Any]:
    fields: dict[str, str] = {}
    try:
        for line in _read("/proc/cpuinfo").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return {
        "vendor": fields.get("vendor_id", ""),
        "model": fields.get("model name", os.uname().machine),
        "sockets": None,
        "cores": None,
        "threads": os.cpu_count(),
        "frequency_mhz": float(fields["cpu MHz"]) if "cpu MHz" in fields else None,
        "flags": sorted(set(fields.get("flags", "").split())),
    }


def detect_memory() -> dict[str, Any]:
    values: dict[str, int] = {}
    try:
        for line in _read("/proc/meminfo").splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"total_bytes": values.get("MemTotal"), "available_bytes": values.get("MemAvailable")}


def detect_python() -> dict[str, Any]:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }


def detect_host() -> dict[str, Any]:
    """Host name and system kind; ``CMX_SYSTEM_TYPE`` (datacenter, edge, workstation, ci)
    and ``CMX_NUMBER_OF_NODES`` say what cannot be probed."""
    nodes = os.environ.get("CMX_NUMBER_OF_NODES", "1")
    return {
        "name": os.uname().nodename,
        "type": os.environ.get("CMX_SYSTEM_TYPE") or None,
        "number_of_nodes": int(nodes) if nodes.isdigit() else 1,
    }


def detect_container() -> dict[str, Any] | None:
    """The container this process runs in, as a container executor declared it through
    ``CMX_CONTAINER_IMAGE``, ``CMX_CONTAINER_DIGEST`` and ``CMX_CONTAINER_RUNTIME``; None
    when not in a cmx-started container."""
    image = os.environ.get("CMX_CONTAINER_IMAGE")
    if not image:
        return None
    return {"image": image, "digest": os.environ.get("CMX_CONTAINER_DIGEST") or None,
            "runtime": os.environ.get("CMX_CONTAINER_RUNTIME") or None}
