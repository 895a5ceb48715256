"""NVIDIA GPUs: NVML first, ``nvidia-smi`` as the fallback, the kernel module version last.

Nothing here compiles or runs CUDA code: no GPU (or no driver) is an empty device list with
the reason, never an error.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import Any

from cmx_detect.facts import GpuDevice, GpuFacts, MigDevice
from cmx_detect.nvml import NvmlCallError, NvmlSession
from cmx_detect.source import Source
from cmx_detect.tags import classify

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVLINK_MAX_LINKS = 36
MIB = 1 << 20
# nvmlDeviceGetArchitecture values (NVML_DEVICE_ARCH_*)
ARCHITECTURES = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
                 8: "Ada Lovelace", 9: "Hopper", 10: "Blackwell"}

QUERY_FIELDS = (
    "index", "name", "uuid", "memory.total", "compute_cap", "mig.mode.current", "power.limit",
    "clocks.max.sm", "clocks.max.memory", "pcie.link.gen.max", "pcie.link.width.max",
    "pci.bus_id", "driver_version",
)
QUERY_ARGV = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")


def device(index: int, name: str, **kw: Any) -> GpuDevice:
    """A :class:`GpuDevice` with its accelerator tags filled from name and memory."""
    tags = classify(name, kw.get("memory_total_bytes"))
    return GpuDevice(index=index, name=name, accelerator_tag=tags[0] if tags else None,
                     accelerator_tags=tags, **kw)


# -- NVML -----------------------------------------------------------------------------------

def _opt(nvml: NvmlSession, fn: str, *args: int | str) -> Any:
    """An optional query: None when the GPU or driver does not support it."""
    try:
        return nvml.call(fn, *args)
    except NvmlCallError:
        return None


def _cuda_version(number: Any) -> str | None:
    """NVML's 12040 -> ``"12.4"``."""
    if not isinstance(number, int) or number <= 0:
        return None
    return f"{number // 1000}.{number % 1000 // 10}"


def _nvlinks(nvml: NvmlSession, dev: str) -> int | None:
    active = 0
    for link in range(NVLINK_MAX_LINKS):
        try:
            state = nvml.call("nvmlDeviceGetNvLinkState", dev, link)
        except NvmlCallError as err:
            if link == 0 and err.name == "NVMLError_NotSupported":
                return 0
            break
        active += 1 if state else 0
    return active


def _mig_devices(nvml: NvmlSession, dev: str) -> list[MigDevice]:
    count = _opt(nvml, "nvmlDeviceGetMaxMigDeviceCount", dev) or 0
    found = []
    for i in range(count):
        try:
            path = nvml.call("nvmlDeviceGetMigDeviceHandleByIndex", dev, i)
        except NvmlCallError:
            continue  # slot not populated
        mem = _opt(nvml, "nvmlDeviceGetMemoryInfo", path) or {}
        found.append(MigDevice(index=i, name=_opt(nvml, "nvmlDeviceGetName", path),
                               uuid=_opt(nvml, "nvmlDeviceGetUUID", path),
                               memory_total_bytes=mem.get("total"),
                               gpu_instance_id=_opt(nvml, "nvmlDeviceGetGpuInstanceId", path),
                               compute_instance_id=_opt(nvml, "nvmlDeviceGetComputeInstanceId", path)))
    return found


def _nvml_device(nvml: NvmlSession, index: int) -> GpuDevice:
    dev = str(index)
    mem = _opt(nvml, "nvmlDeviceGetMemoryInfo", dev) or {}
    cc = _opt(nvml, "nvmlDeviceGetCudaComputeCapability", dev)
    mig = _opt(nvml, "nvmlDeviceGetMigMode", dev)
    mig_mode = None if not mig else ("enabled" if mig[0] else "disabled")
    pci = _opt(nvml, "nvmlDeviceGetPciInfo", dev) or {}
    return device(
        index, nvml.call("nvmlDeviceGetName", dev), vendor="nvidia",
        uuid=_opt(nvml, "nvmlDeviceGetUUID", dev),
        memory_total_bytes=mem.get("total"),
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        pci_bus_id=pci.get("busId"),
        mig_mode=mig_mode,
        mig_devices=_mig_devices(nvml, dev) if mig_mode == "enabled" else [],
        power_limit_mw=_opt(nvml, "nvmlDeviceGetPowerManagementLimit", dev),
        max_sm_clock_mhz=_opt(nvml, "nvmlDeviceGetMaxClockInfo", dev, NVML_CLOCK_SM),
        max_memory_clock_mhz=_opt(nvml, "nvmlDeviceGetMaxClockInfo", dev, NVML_CLOCK_MEM),
        pcie_generation_max=_opt(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", dev),
        pcie_link_width_max=_opt(nvml, "nvmlDeviceGetMaxPcieLinkWidth", dev),
        nvlink_active_links=_nvlinks(nvml, dev),
        architecture=ARCHITECTURES.get(_opt(nvml, "nvmlDeviceGetArchitecture", dev)),
    )


def from_nvml(nvml: NvmlSession) -> GpuFacts:
    count = nvml.call("nvmlDeviceGetCount")
    devices = [_nvml_device(nvml, i) for i in range(count)]
    return GpuFacts(devices=devices, driver_version=nvml.call("nvmlSystemGetDriverVersion"),
                    cuda_driver_version=_cuda_version(_opt(nvml, "nvmlSystemGetCudaDriverVersion_v2")),
                    source="nvml", reason=None if devices else "NVML reports 0 GPUs",
                    interconnect=interconnect(devices))


def interconnect(devices: list[GpuDevice]) -> str | None:
    if not devices:
        return None
    return "nvlink" if all((d.nvlink_active_links or 0) > 0 for d in devices) else "pcie"


# -- nvidia-smi -----------------------------------------------------------------------------

class ParseError(ValueError):
    """Output of a tool that does not have the expected format."""


def _na(value: str) -> str | None:
    value = value.strip()
    return None if not value or value.startswith("[") or value in {"N/A", "Not Supported"} else value


def _num(value: str, cast: Any = int) -> Any:
    text = _na(value)
    if text is None:
        return None
    try:
        return cast(float(text)) if cast is int else cast(text)
    except ValueError:
        raise ParseError(f"not a number: {value.strip()!r}") from None


def parse_query_csv(text: str) -> tuple[list[GpuDevice], str | None]:
    """Parse ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``."""
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows:
        raise ParseError("no rows")
    devices, driver = [], None
    for row in rows:
        if len(row) != len(QUERY_FIELDS):
            raise ParseError(f"expected {len(QUERY_FIELDS)} columns, got {len(row)}: {','.join(row)[:80]!r}")
        f = dict(zip(QUERY_FIELDS, (c.strip() for c in row), strict=True))
        power_w = _num(f["power.limit"], float)
        mem_mib = _num(f["memory.total"])
        mig = _na(f["mig.mode.current"])
        devices.append(device(
            _num(f["index"]), f["name"], vendor="nvidia", uuid=_na(f["uuid"]),
            memory_total_bytes=mem_mib * MIB if mem_mib is not None else None,
            compute_capability=_na(f["compute_cap"]), pci_bus_id=_na(f["pci.bus_id"]),
            mig_mode=mig.lower() if mig else None,
            power_limit_mw=int(power_w * 1000) if power_w is not None else None,
            max_sm_clock_mhz=_num(f["clocks.max.sm"]), max_memory_clock_mhz=_num(f["clocks.max.memory"]),
            pcie_generation_max=_num(f["pcie.link.gen.max"]), pcie_link_width_max=_num(f["pcie.link.width.max"]),
        ))
        driver = _na(f["driver_version"]) or driver
    return devices, driver


def parse_smi_xml(text: str) -> dict[str, Any]:
    """From ``nvidia-smi -q -x``: driver and CUDA versions, and per GPU UUID its MIG devices."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise ParseError(f"not XML: {err}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"unexpected root element <{root.tag}>")
    migs: dict[str, list[MigDevice]] = {}
    archs: dict[str, str | None] = {}
    for gpu in root.findall("gpu"):
        uuid = (gpu.findtext("uuid") or "").strip()
        migs[uuid] = [_xml_mig(i, m) for i, m in enumerate(gpu.findall("mig_devices/mig_device"))]
        archs[uuid] = _na(gpu.findtext("product_architecture") or "")
    return {"driver_version": _na(root.findtext("driver_version") or ""),
            "cuda_version": _na(root.findtext("cuda_version") or ""), "mig": migs, "arch": archs}


def _xml_mig(i: int, node: ET.Element) -> MigDevice:
    total = _na(node.findtext("fb_memory_usage/total") or "")
    mib = re.match(r"(\d+)\s*MiB", total or "")
    return MigDevice(index=_num(node.findtext("index") or str(i)) or i, name=None, uuid=None,
                     memory_total_bytes=int(mib.group(1)) * MIB if mib else None,
                     gpu_instance_id=_num(node.findtext("gpu_instance_id") or ""),
                     compute_instance_id=_num(node.findtext("compute_instance_id") or ""))


def from_nvidia_smi(src: Source, smi: str, timeout_s: float) -> GpuFacts:
    """The fallback where NVML is not usable but ``nvidia-smi`` exists."""
    result = src.run("nvidia-smi-query-gpu", [smi, *QUERY_ARGV], timeout_s=timeout_s)
    if not result.ok:
        return empty(f"nvidia-smi failed: {result.why()}", "nvidia-smi")
    try:
        devices, driver = parse_query_csv(result.stdout)
    except ParseError as err:
        return empty(f"cannot parse nvidia-smi --query-gpu output: {err}", "nvidia-smi")
    cuda, notes = None, []
    xml = src.run("nvidia-smi-q-x", [smi, "-q", "-x"], timeout_s=timeout_s)
    if xml.ok:
        try:
            info = parse_smi_xml(xml.stdout)
            cuda, driver = info["cuda_version"], info["driver_version"] or driver
            devices = [replace(d, mig_devices=info["mig"].get(d.uuid or "", []),
                               architecture=info["arch"].get(d.uuid or "")) for d in devices]
        except ParseError as err:
            notes.append(f"nvidia-smi -q -x ignored: {err}")
    else:
        notes.append(f"nvidia-smi -q -x: {xml.why()}")
    return GpuFacts(devices=devices, driver_version=driver, cuda_driver_version=cuda,
                    source="nvidia-smi", reason=None, interconnect=None, notes=notes)


def empty(reason: str, source: str | None = None, driver: str | None = None) -> GpuFacts:
    return GpuFacts(devices=[], driver_version=driver, cuda_driver_version=None, source=source, reason=reason)


_PROC_VERSION = re.compile(r"Kernel Module(?: for [\w.]+)?\s+([\d.]+)")


def kernel_driver_version(src: Source) -> str | None:
    """The loaded kernel module's version from ``/proc/driver/nvidia/version``."""
    text = src.read_text("/proc/driver/nvidia/version") or ""
    match = _PROC_VERSION.search(text)
    return match.group(1) if match else None


def detect_nvidia(src: Source, timeout_s: float = 15) -> GpuFacts:
    """NVML, else nvidia-smi, else an empty list whose reason says what is missing."""
    try:
        nvml = src.nvml()
    except NvmlCallError as nvml_err:
        return _without_nvml(src, f"{nvml_err}" if str(nvml_err) else nvml_err.name, timeout_s)
    try:
        return from_nvml(nvml)
    except NvmlCallError as err:
        return _without_nvml(src, f"NVML query failed: {err}", timeout_s)
    finally:
        nvml.close()


def _without_nvml(src: Source, nvml_reason: str, timeout_s: float) -> GpuFacts:
    smi = src.which("nvidia-smi")
    if smi:
        facts = from_nvidia_smi(src, smi, timeout_s)
        return replace(facts, notes=[f"NVML: {nvml_reason}", *facts.notes])
    driver = kernel_driver_version(src)
    if driver:
        return empty(f"NVIDIA kernel driver {driver} is loaded but NVML is not usable ({nvml_reason}) "
                     "and nvidia-smi is not on PATH", driver=driver)
    return empty(nvml_reason)
