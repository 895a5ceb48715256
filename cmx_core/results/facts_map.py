"""Map detected facts (see the facts contract) onto the result's ``system`` and ``software``.

Facts may be partial or come from a plugin with a bug: every missing or mistyped value
becomes ``null``, never an exception. Units stay native (bytes, MHz) and live in key names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_GPU_VENDOR_BY_SOURCE = {"nvml": "NVIDIA", "nvidia-smi": "NVIDIA", "rocm-smi": "AMD", "amd-smi": "AMD"}
_VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel"}
_SYSTEM_TYPES = {"datacenter", "edge", "workstation", "ci"}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (str, int, float)):
        text = str(value).strip()
        return text or None
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _num(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        try:
            return _num(float(value))
        except ValueError:
            return None
    return None


def system_section(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The ``system`` object of the result from the facts (all keys present, null if unknown)."""
    host = _map(facts.get("host"))
    system_type = _str(host.get("type"))
    return {
        "name": _str(host.get("name")),
        "type": system_type if system_type in _SYSTEM_TYPES else None,
        "number_of_nodes": _int(host.get("number_of_nodes")) or 1,
        "cpu": _cpu(_map(facts.get("cpu"))),
        "memory": {"capacity_bytes": _int(_map(facts.get("memory")).get("total_bytes"))},
        "accelerator": _accelerator(_map(facts.get("gpus")), _map(facts.get("cuda"))),
        "os": _os(_map(facts.get("os"))),
        "container": _container(facts.get("container")),
    }


def _cpu(cpu: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "vendor": _str(cpu.get("vendor")),
        "model": _str(cpu.get("model")),
        "core_count": _int(cpu.get("cores")),
        "count_per_node": _int(cpu.get("sockets")),
        "vcpu_count": _int(cpu.get("threads")),
        "frequency_mhz": _num(cpu.get("frequency_mhz")),
    }


def _os(os_facts: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _str(os_facts.get(key)) for key in ("name", "distro", "version", "pretty_name", "kernel", "arch")}


def _container(value: Any) -> dict[str, Any] | None:
    container = _map(value)
    image = _str(container.get("image"))
    if image is None:
        return None
    return {"image": image, "digest": _str(container.get("digest")), "runtime": _str(container.get("runtime"))}


def _accelerator(gpus: Mapping[str, Any], cuda: Mapping[str, Any]) -> dict[str, Any] | None:
    devices = [d for d in gpus.get("devices") or () if isinstance(d, Mapping)] if isinstance(
        gpus.get("devices"), Sequence) else []
    if not devices:
        return None
    first = devices[0]
    same = [d for d in devices if d.get("name") == first.get("name")]
    vendor = _str(first.get("vendor"))
    vendor = _VENDOR_NAMES.get(vendor.lower(), vendor) if vendor else _GPU_VENDOR_BY_SOURCE.get(
        str(gpus.get("source")))
    selected = _map(cuda.get("selected"))
    return {
        "vendor": vendor,
        "name": _str(first.get("name")),
        "tag": _str(first.get("accelerator_tag")),
        "count_per_node": len(same),
        "total_count": len(devices),
        "memory_capacity_bytes": _int(first.get("memory_total_bytes")),
        "driver_version": _str(gpus.get("driver_version")),
        "cuda_version": _str(selected.get("version")) or _str(gpus.get("cuda_driver_version")),
        "compute_capability": _str(first.get("compute_capability")),
        "mig_profile": _str(first.get("mig_profile")) or _mig_profiles(first),
        "interconnect": _str(gpus.get("interconnect")),
    }


def _mig_profiles(device: Mapping[str, Any]) -> str | None:
    """``3g.40gb,1g.10gb`` from MIG instance names like ``NVIDIA A100-SXM4-80GB MIG 3g.40gb``."""
    if str(device.get("mig_mode") or "").lower() != "enabled":
        return None
    instances = device.get("mig_devices")
    names = [str(m.get("name") or "") for m in instances if isinstance(m, Mapping)] if isinstance(
        instances, Sequence) else []
    profiles = dict.fromkeys(n.rsplit(" MIG ", 1)[-1].strip() for n in names if " MIG " in n)
    return ",".join(profiles) or None


def python_version(facts: Mapping[str, Any]) -> str | None:
    return _str(_map(facts.get("python")).get("version"))


def packages(facts: Mapping[str, Any]) -> dict[str, str]:
    """``{distribution: version}`` from a ``packages`` fact, plus torch when detected."""
    found = {str(k): v for k, v in _map(facts.get("packages")).items() if isinstance(v, str)}
    torch_version = _str(_map(facts.get("torch")).get("version"))
    if torch_version:
        found.setdefault("torch", torch_version)
    return found
