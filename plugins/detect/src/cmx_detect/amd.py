"""AMD GPUs through ``amd-smi static --json`` (ROCm >= 6) or ``rocm-smi --json``."""

from __future__ import annotations

import json
import re
from typing import Any

from cmx_detect.facts import GpuDevice, GpuFacts
from cmx_detect.markers import FieldReader, Unavailable
from cmx_detect.nvidia import MIB, ParseError, empty
from cmx_detect.smi import device
from cmx_detect.source import Source
from cmx_detect.tags import Identity
from cmx_detect.versions import normalise

ROCM_SMI_ARGV = ("--showproductname", "--showmeminfo", "vram", "--showuniqueid", "--showbus",
                 "--showdriverversion", "--json")
AMD_SMI_ARGV = ("static", "--asic", "--bus", "--vram", "--driver", "--json")
_UNITS = {"B": 1, "KB": 1 << 10, "MB": MIB, "GB": 1 << 30}


def _size(value: Any) -> int | None:
    """amd-smi sizes: ``{"value": 196592, "unit": "MB"}`` (ROCm 6.1+) or ``"196592 MB"``."""
    if isinstance(value, dict):
        value = f"{value.get('value')} {value.get('unit', 'MB')}"
    match = re.match(r"^\s*([\d.]+)\s*([KMG]?B)\s*$", str(value or ""))
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def parse_amd_smi(text: str) -> tuple[list[GpuDevice], str | None]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ParseError(f"not JSON ({err.msg})") from None
    if isinstance(data, dict):  # amd-smi >= 24.7 wraps the list: {"gpu_data": [...]}
        data = data.get("gpu_data", [])
    if not isinstance(data, list):
        raise ParseError("expected a list of GPUs")
    devices: list[GpuDevice] = []
    driver: str | None = None
    for entry in data:
        asic, bus = entry.get("asic", {}), entry.get("bus", {})
        r = FieldReader("amd-smi")
        driver = r.text("driver_version", entry.get("driver", {}).get("version")) or driver
        r.unavailable.clear()
        gfx = r.text("compute_capability", asic.get("target_graphics_version"))
        pci_id = _amd_pci_id(r.text("pci_device_id", asic.get("device_id")))
        devices.append(device(
            int(entry.get("gpu", len(devices))), r.text("name", asic.get("market_name")) or "unknown AMD GPU",
            Identity(pci_device_id=pci_id, gfx=gfx), vendor="amd", uuid=r.text("uuid", asic.get("asic_serial")),
            memory_total_bytes=_size(entry.get("vram", {}).get("size")), compute_capability=gfx,
            pci_bus_id=r.text("pci_bus_id", bus.get("bdf")), pci_device_id=pci_id, unavailable=r.unavailable,
        ))
    return devices, driver


def _amd_pci_id(raw: str | None) -> str | None:
    """``0x740c`` (rocm-smi's "GPU ID"/"Device ID", amd-smi's device_id) as ``1002:740c``."""
    match = re.fullmatch(r"(?:0x)?([0-9a-fA-F]{4})", (raw or "").strip())
    return f"1002:{match.group(1).lower()}" if match else None


def parse_rocm_smi(text: str) -> tuple[list[GpuDevice], str | None]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ParseError(f"not JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise ParseError("expected a JSON object keyed by card")
    cards = sorted((k for k in data if re.fullmatch(r"card\d+", k)), key=lambda k: int(k[4:]))
    devices = []
    for key in cards:
        card = data[key]
        r = FieldReader("rocm-smi")
        total = r.text("memory_total_bytes", card.get("VRAM Total Memory (B)"))
        gfx = r.text("compute_capability", card.get("GFX Version"))
        pci_id = _amd_pci_id(r.text("pci_device_id", card.get("Device ID") or card.get("GPU ID")))
        name = r.text("name", card.get("Card Series") or card.get("Card series")) or "unknown AMD GPU"
        devices.append(device(
            int(key[4:]), name, Identity(pci_device_id=pci_id, gfx=gfx, sku=card.get("Card SKU")),
            vendor="amd", uuid=r.text("uuid", card.get("Unique ID")),
            memory_total_bytes=int(total) if total is not None and total.isdigit() else None,
            compute_capability=gfx, pci_bus_id=r.text("pci_bus_id", card.get("PCI Bus")), pci_device_id=pci_id,
            unavailable=r.unavailable,
        ))
    return devices, data.get("system", {}).get("Driver version")


def detect_amd(src: Source, timeout_s: float = 15) -> GpuFacts | None:
    """AMD GPUs, or None when neither tool is installed (so NVIDIA's reason stands)."""
    tried = []
    for tool, argv, parse in (("amd-smi", AMD_SMI_ARGV, parse_amd_smi),
                              ("rocm-smi", ROCM_SMI_ARGV, parse_rocm_smi)):
        path = src.which(tool)
        if not path:
            continue
        result = src.run(tool, [path, *argv], timeout_s=timeout_s)
        if not result.ok:
            tried.append(f"{tool}: {result.why()}")
            continue
        try:
            devices, driver = parse(result.stdout)
        except (ParseError, AttributeError, TypeError, ValueError) as err:
            tried.append(f"cannot parse {tool} output: {err}")
            continue
        top = FieldReader(tool)
        drv, rocm = normalise(top.text("driver_version", driver)), normalise(_rocm_version(src))
        return GpuFacts(devices=devices, driver_version=drv.version, cuda_driver_version=None,
                        source=tool, reason=None if devices else f"{tool} reports 0 GPUs",
                        rocm_version=rocm.version, notes=tried, driver_version_raw=drv.raw,
                        rocm_version_raw=rocm.raw, unavailable=_top_unavailable(top.unavailable, driver))
    return empty("; ".join(tried)) if tried else None


def _top_unavailable(found: list[Unavailable], driver: str | None) -> list[Unavailable]:
    return found if driver is not None else [*found, Unavailable("driver_version", "not reported")]


def _rocm_version(src: Source) -> str | None:
    text = src.read_text("/opt/rocm/.info/version") or ""
    return text.strip() or None
