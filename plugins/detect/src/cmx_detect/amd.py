"""AMD GPUs through ``amd-smi static --json`` (ROCm >= 6) or ``rocm-smi --json``."""

from __future__ import annotations

import json
import re
from typing import Any

from cmx_detect.facts import GpuDevice, GpuFacts
from cmx_detect.nvidia import MIB, ParseError, device, empty
from cmx_detect.source import Source

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
        drv = entry.get("driver", {})
        driver = drv.get("version") or driver
        devices.append(device(
            int(entry.get("gpu", len(devices))), str(asic.get("market_name") or "unknown AMD GPU"),
            vendor="amd", uuid=asic.get("asic_serial"),
            memory_total_bytes=_size(entry.get("vram", {}).get("size")),
            compute_capability=asic.get("target_graphics_version"),
            pci_bus_id=bus.get("bdf"),
        ))
    return devices, driver


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
        total = card.get("VRAM Total Memory (B)")
        devices.append(device(
            int(key[4:]), str(card.get("Card Series") or card.get("Card series") or "unknown AMD GPU"),
            vendor="amd", uuid=card.get("Unique ID"),
            memory_total_bytes=int(total) if str(total or "").isdigit() else None,
            compute_capability=card.get("GFX Version"),
            pci_bus_id=card.get("PCI Bus"),
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
        return GpuFacts(devices=devices, driver_version=driver, cuda_driver_version=None,
                        source=tool, reason=None if devices else f"{tool} reports 0 GPUs",
                        rocm_version=_rocm_version(src), notes=tried)
    return empty("; ".join(tried)) if tried else None


def _rocm_version(src: Source) -> str | None:
    text = src.read_text("/opt/rocm/.info/version") or ""
    return text.strip().split("-")[0] or None
