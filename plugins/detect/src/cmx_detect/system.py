"""OS, CPU, memory and Python facts (richer versions of cmx-core's built-in detectors)."""

from __future__ import annotations

import json
import os
import platform
import re
from typing import Any

from cmx_detect.facts import CpuCaches, CpuFacts, MemoryFacts, OsFacts, PythonFacts
from cmx_detect.source import Source, python_value

# ISA flags that matter for ML kernels, as /proc/cpuinfo and lscpu spell them.
KEY_ISA = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
    "asimd", "sve", "sve2", "bf16", "i8mm",
)


def _uname() -> dict[str, str]:
    u = os.uname()
    return {"sysname": u.sysname, "release": u.release, "machine": u.machine}


def _libc() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        lib, version = platform.libc_ver()
        return f"{lib} {version}" if lib else None


def parse_os_release(text: str) -> dict[str, str]:
    """``KEY=value`` lines of ``/etc/os-release`` (quotes removed)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def detect_os(src: Source) -> OsFacts:
    uname = src.value("uname", _uname)
    release = parse_os_release(src.read_text("/etc/os-release") or src.read_text("/usr/lib/os-release") or "")
    kernel = re.match(r"[\d.]+", uname["release"])
    return OsFacts(
        name=uname["sysname"].lower(),
        distro=release.get("NAME"),
        version=release.get("VERSION_ID"),
        kernel=kernel.group(0).rstrip(".") if kernel else uname["release"],
        arch=uname["machine"],
        libc=src.value("libc", _libc),
        distro_id=release.get("ID"),
        pretty_name=release.get("PRETTY_NAME"),
    )


# -- CPU ------------------------------------------------------------------------------------

def _flatten_lscpu(items: list[dict[str, Any]]) -> dict[str, str]:
    """``lscpu -J`` fields (flat in util-linux <= 2.36, nested ``children`` since 2.37)."""
    out: dict[str, str] = {}
    for item in items:
        field = str(item.get("field", "")).rstrip(":").strip()
        if item.get("data") is not None:
            out.setdefault(field, str(item["data"]))
        out.update({k: v for k, v in _flatten_lscpu(item.get("children", [])).items() if k not in out})
    return out


_SIZE = re.compile(r"^([\d.]+)\s*([KMGT]i?B?|[KMG])?\s*(?:\((\d+) instances?\))?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_cache_size(text: str) -> int | None:
    """``"2 MiB (2 instances)"`` -> total bytes (``2 MiB``: lscpu already sums instances);
    ``"32K"`` (old lscpu: one instance) -> 32768."""
    match = _SIZE.match(text.strip())
    if not match:
        return None
    unit = (match.group(2) or "").lower()[:1]
    return int(float(match.group(1)) * _UNITS.get(unit, 1))


def _cache(fields: dict[str, str], level: str) -> int | None:
    """``L2 cache`` (flat lscpu) or ``L2`` under ``Caches (sum of all)`` (nested lscpu)."""
    text = fields.get(f"{level} cache") or fields.get(level)
    return parse_cache_size(text) if text else None


def _int(text: str | None) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _float(text: str | None) -> float | None:
    try:
        return round(float(str(text).strip()), 3)
    except (TypeError, ValueError):
        return None


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks = []
    for chunk in text.strip().split("\n\n"):
        fields = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if fields:
            blocks.append(fields)
    return blocks


def _cpu_from_cpuinfo(text: str, arch: str) -> CpuFacts:
    blocks = [b for b in _cpuinfo_blocks(text) if "processor" in b]
    first = blocks[0] if blocks else {}
    sockets = len({b.get("physical id") for b in blocks if "physical id" in b}) or (1 if blocks else None)
    per_socket = _int(first.get("cpu cores"))
    flags = (first.get("flags") or first.get("Features") or "").split()
    return CpuFacts(
        vendor=first.get("vendor_id") or first.get("CPU implementer"),
        model=first.get("model name") or first.get("Model"),
        sockets=sockets,
        cores=per_socket * sockets if per_socket and sockets else len(blocks) or None,
        threads=len(blocks) or None,
        frequency_mhz=_float(first.get("cpu MHz")),
        flags=flags,
        isa=[f for f in KEY_ISA if f in flags],
        arch=arch,
        source="/proc/cpuinfo",
    )


def _cpu_from_lscpu(fields: dict[str, str], cpuinfo: CpuFacts | None, arch: str) -> CpuFacts:
    sockets = _int(fields.get("Socket(s)"))
    per_socket = _int(fields.get("Core(s) per socket"))
    flags = fields.get("Flags", "").split()
    caches = CpuCaches(*(_cache(fields, level) for level in ("L1d", "L1i", "L2", "L3")))
    current = cpuinfo.frequency_mhz if cpuinfo else None
    return CpuFacts(
        vendor=fields.get("Vendor ID"),
        model=fields.get("Model name"),
        sockets=sockets,
        cores=per_socket * sockets if per_socket and sockets else None,
        threads=_int(fields.get("CPU(s)")),
        frequency_mhz=current or _float(fields.get("CPU MHz")) or _float(fields.get("CPU max MHz")),
        flags=flags,
        max_frequency_mhz=_float(fields.get("CPU max MHz")),
        caches=caches,
        isa=[f for f in KEY_ISA if f in flags],
        arch=fields.get("Architecture") or arch,
        source="lscpu",
    )


def detect_cpu(src: Source) -> CpuFacts:
    """``lscpu -J`` when it works (sockets, caches, max MHz), else ``/proc/cpuinfo``."""
    arch = src.value("uname", _uname)["machine"]
    text = src.read_text("/proc/cpuinfo")
    cpuinfo = _cpu_from_cpuinfo(text, arch) if text else None
    result = src.run("lscpu-json", ["lscpu", "-J"], timeout_s=5) if src.which("lscpu") else None
    if result is not None and result.ok:
        try:
            fields = _flatten_lscpu(json.loads(result.stdout).get("lscpu", []))
        except (json.JSONDecodeError, AttributeError):
            fields = {}
        if fields.get("CPU(s)"):
            return _cpu_from_lscpu(fields, cpuinfo, arch)
    if cpuinfo is not None:
        return cpuinfo
    return CpuFacts(vendor=None, model=platform.processor() or None, sockets=None, cores=None,
                    threads=os.cpu_count(), frequency_mhz=None, arch=arch, source="os.cpu_count")


# -- memory and python ----------------------------------------------------------------------

def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` as bytes (values are in kB, i.e. KiB)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def detect_memory(src: Source) -> MemoryFacts:
    info = parse_meminfo(src.read_text("/proc/meminfo") or "")
    if "MemTotal" not in info:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            total = None
        return MemoryFacts(total_bytes=total, available_bytes=None)
    return MemoryFacts(total_bytes=info["MemTotal"], available_bytes=info.get("MemAvailable"),
                       swap_total_bytes=info.get("SwapTotal"))


def detect_python(src: Source) -> PythonFacts:
    data = src.value("python", python_value)
    return PythonFacts(
        version=data["version"], implementation=data["implementation"],
        executable=data["executable"], prefix=data.get("prefix"),
        is_virtualenv=data.get("is_virtualenv"),
    )
