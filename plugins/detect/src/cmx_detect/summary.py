"""One-line human summaries of facts for ``cmx detect`` without ``--json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

GIB = 1 << 30


def _gib(value: Any) -> str:
    return f"{value / GIB:.1f} GiB" if isinstance(value, (int, float)) else "?"


def _os(v: dict[str, Any]) -> str:
    return (f"{v.get('name')} {v.get('distro')} {v.get('version')}, kernel {v.get('kernel')}, "
            f"{v.get('arch')}, {v.get('libc')}")


def _cpu(v: dict[str, Any]) -> str:
    isa = " ".join(v.get("isa") or [])
    return (f"{v.get('model')} ({v.get('vendor')}): {v.get('sockets')} socket(s), {v.get('cores')} cores, "
            f"{v.get('threads')} threads" + (f"; {isa}" if isa else ""))


def _memory(v: dict[str, Any]) -> str:
    return f"{_gib(v.get('total_bytes'))} total, {_gib(v.get('available_bytes'))} available"


def _python(v: dict[str, Any]) -> str:
    return f"{v.get('implementation')} {v.get('version')} ({v.get('executable')})"


def _cuda(v: dict[str, Any]) -> str:
    sel = v.get("selected")
    head = f"{sel.get('version')} at {sel.get('home')}" if sel else "none"
    return f"{head}; {len(v.get('toolkits') or [])} toolkit(s); {v.get('reason')}"


def _gpus(v: dict[str, Any]) -> str:
    devices = v.get("devices") or []
    if not devices:
        return f"none ({v.get('reason')})"
    names: dict[str, int] = {}
    for d in devices:
        names[d["name"]] = names.get(d["name"], 0) + 1
    listed = ", ".join(f"{n}x {name}" for name, n in names.items())
    return (f"{listed} via {v.get('source')}; driver {v.get('driver_version')}, "
            f"CUDA driver {v.get('cuda_driver_version')}")


def _accelerator(v: list[str]) -> str:
    return ", ".join(v) if v else "none"


def _torch(v: dict[str, Any]) -> str:
    if not v.get("installed"):
        return f"not installed ({v.get('reason')})"
    if v.get("cuda_build"):
        build = f"CUDA {v['cuda_build']}"
    elif v.get("hip_build"):
        build = f"ROCm {v['hip_build']}"
    else:
        build = "CPU build"
    return f"{v.get('version')} ({build}), {v.get('device_count')} device(s) visible"


def _engines(v: dict[str, Any]) -> str:
    parts = []
    for e in v.get("engines") or []:
        state = f"server {e['server_version']}" if e.get("reachable") else f"not reachable ({e.get('reason')})"
        parts.append(f"{e['name']} {e.get('client_version')} {state}")
    return "; ".join(parts) or "none"


_SUMMARIES: dict[str, Callable[[Any], str]] = {
    "os": _os, "cpu": _cpu, "memory": _memory, "python": _python, "cuda": _cuda, "gpus": _gpus,
    "accelerator": _accelerator, "torch": _torch, "container_engines": _engines,
}


def summarise(name: str, value: Any) -> str:
    if value is None:
        return "unavailable"
    try:
        return _SUMMARIES[name](value)
    except (KeyError, TypeError, AttributeError):
        return _generic(value)


def _generic(value: Any) -> str:
    """A fact without its own summary: its shape, never a value cut short (``--json`` has it whole)."""
    if isinstance(value, dict):
        return f"{len(value)} field(s): {', '.join(map(str, value))} (--json shows them)"
    if isinstance(value, list):
        return f"{len(value)} item(s) (--json shows them)"
    return json.dumps(value)
