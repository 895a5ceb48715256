"""NVIDIA GPUs: NVML first, ``nvidia-smi`` as the fallback, the kernel module version last.

Nothing here compiles or runs CUDA code: no GPU (or no driver) is an empty device list with
the reason, never an error.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from cmx_detect.facts import GpuDevice, GpuFacts, MigDevice
from cmx_detect.markers import clean
from cmx_detect.nvml import NvmlCallError, NvmlSession
from cmx_detect.smi import (
    MIB,
    QUERY_ARGV,
    ParseError,
    SmiReport,
    parse_list,
    parse_query_csv,
    parse_smi_xml,
    parse_topology,
    retag,
    tool_message,
)
from cmx_detect.smi import device as smi_device
from cmx_detect.source import Source
from cmx_detect.tags import Identity
from cmx_detect.versions import normalise

__all__ = ["MIB", "ParseError", "detect_nvidia", "device", "empty", "from_nvml"]

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVLINK_MAX_LINKS = 36
# nvmlDeviceGetArchitecture values (NVML_DEVICE_ARCH_*)
ARCHITECTURES = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
                 8: "Ada Lovelace", 9: "Hopper", 10: "Blackwell"}


def device(index: int, name: str, **kw: Any) -> GpuDevice:
    """A :class:`GpuDevice` tagged by name, memory and (when given) PCI id and compute capability."""
    ident = Identity(pci_device_id=kw.get("pci_device_id"), compute_capability=kw.get("compute_capability"))
    return smi_device(index, name, ident, **kw)


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
        name = _opt(nvml, "nvmlDeviceGetName", path)
        profile = re.search(r"\bMIG\s+(\d+g\.\d+gb)", name or "", re.IGNORECASE)
        found.append(MigDevice(index=i, name=name, profile=profile.group(1) if profile else None,
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
        pci_device_id=_nvml_pci_id(pci.get("pciDeviceId")),
    )


def _nvml_pci_id(value: Any) -> str | None:
    """NVML's pciDeviceId (device << 16 | vendor) as ``10de:2330``."""
    if not isinstance(value, int) or value <= 0:
        return None
    return f"{value & 0xFFFF:04x}:{value >> 16:04x}"


def from_nvml(nvml: NvmlSession) -> GpuFacts:
    count = nvml.call("nvmlDeviceGetCount")
    devices = [_nvml_device(nvml, i) for i in range(count)]
    driver = normalise(clean(nvml.call("nvmlSystemGetDriverVersion")))
    cuda = _cuda_version(_opt(nvml, "nvmlSystemGetCudaDriverVersion_v2"))
    return GpuFacts(devices=devices, driver_version=driver.version, cuda_driver_version=cuda,
                    source="nvml", reason=None if devices else "NVML reports 0 GPUs",
                    interconnect=interconnect(devices), driver_version_raw=driver.raw, cuda_driver_version_raw=cuda)


def interconnect(devices: list[GpuDevice]) -> str | None:
    if not devices:
        return None
    return "nvlink" if all((d.nvlink_active_links or 0) > 0 for d in devices) else "pcie"


# -- nvidia-smi -----------------------------------------------------------------------------

def _run_view(src: Source, probe: str, view: str, argv: list[str], parse: Any,
              timeout_s: float) -> tuple[SmiReport | None, str]:
    """One nvidia-smi view: its report (also from a non-zero exit that printed data, such as
    14 for a corrupted infoROM) or None, and the tool's own words when it failed."""
    result = src.run(probe, argv, timeout_s=timeout_s)
    if result.error:
        return None, result.error
    try:
        report: SmiReport = parse(result.stdout)
    except ParseError as err:
        return None, tool_message(result) if not result.ok else f"cannot parse nvidia-smi {view} output: {err}"
    if not result.ok:
        report = replace(report, notes=[tool_message(result), *report.notes])
    return report, ""


def _merge(base: GpuDevice, other: GpuDevice) -> GpuDevice:
    """``base`` with every field it lacks taken from ``other`` (the same GPU in another view)."""
    filled: dict[str, Any] = {}
    for name in ("uuid", "memory_total_bytes", "compute_capability", "pci_bus_id", "mig_mode", "power_limit_mw",
                 "max_sm_clock_mhz", "max_memory_clock_mhz", "pcie_generation_max", "pcie_link_width_max",
                 "architecture", "pci_device_id"):
        if getattr(base, name) is None and getattr(other, name) is not None:
            filled[name] = getattr(other, name)
    filled["mig_devices"] = _merge_migs(base.mig_devices, other.mig_devices)
    got = {f for f in filled if filled[f] is not None}
    filled["unavailable"] = [u for u in base.unavailable if u.field not in got]
    return retag(replace(base, **filled))


def _merge_migs(mine: list[MigDevice], theirs: list[MigDevice]) -> list[MigDevice]:
    if not mine:
        return list(theirs)
    by_index = {m.index: m for m in theirs}
    out = []
    for m in mine:
        t = by_index.get(m.index)
        out.append(m if t is None else replace(
            m, name=m.name or t.name, uuid=m.uuid or t.uuid, profile=m.profile or t.profile,
            memory_total_bytes=m.memory_total_bytes or t.memory_total_bytes,
            gpu_instance_id=m.gpu_instance_id if m.gpu_instance_id is not None else t.gpu_instance_id,
            compute_instance_id=m.compute_instance_id if m.compute_instance_id is not None else t.compute_instance_id))
    return out


def _combine(reports: list[SmiReport]) -> list[GpuDevice]:
    """The first view's devices, each filled from the same GPU (by UUID, else index) in the others."""
    devices = list(reports[0].devices)
    for other in reports[1:]:
        by_uuid = {d.uuid: d for d in other.devices if d.uuid}
        by_index = {d.index: d for d in other.devices}
        devices = [_merge(d, same) if (same := by_uuid.get(d.uuid or "") or by_index.get(d.index)) else d
                   for d in devices]
    return devices


def from_nvidia_smi(src: Source, smi: str, timeout_s: float) -> GpuFacts:
    """The fallback where NVML is not usable: ``--query-gpu``, ``-q -x`` and ``-L`` merged field
    by field, so one failing view costs its fields, never the GPUs the others list."""
    query, why_query = _run_view(src, "nvidia-smi-query-gpu", "--query-gpu", [smi, *QUERY_ARGV], parse_query_csv,
                                 timeout_s)
    xml, why_xml = _run_view(src, "nvidia-smi-q-x", "-q -x", [smi, "-q", "-x"], parse_smi_xml, timeout_s)
    need_list = (query is None and xml is None) or any(d.mig_mode == "enabled" for r in (query, xml) if r
                                                        for d in r.devices)
    listing, why_list = (_run_view(src, "nvidia-smi-L", "-L", [smi, "-L"], parse_list, timeout_s) if need_list
                         else (None, ""))
    reports = [r for r in (query, xml, listing) if r is not None]
    notes = [f"nvidia-smi {view}: {why}" for view, why in
             (("--query-gpu", why_query), ("-q -x", why_xml), ("-L", why_list)) if why]
    notes += [n for r in reports for n in r.notes]
    if not reports:
        return replace(empty(f"nvidia-smi failed: {why_query}", "nvidia-smi"), notes=notes)
    devices = _combine(reports)
    driver = normalise(next((r.driver for r in (xml, query) if r and r.driver), None))
    cuda = normalise(xml.cuda if xml else None)
    topo = _topology(src, smi, timeout_s, notes) if len(devices) > 1 else None
    return GpuFacts(devices=devices, driver_version=driver.version, cuda_driver_version=cuda.version,
                    source="nvidia-smi", reason=None if devices else "nvidia-smi lists 0 GPUs",
                    interconnect=topo or (interconnect(devices) if len(devices) == 1 else None), notes=notes,
                    driver_version_raw=driver.raw, cuda_driver_version_raw=cuda.raw,
                    unavailable=[u for r in reports for u in r.unavailable])


def _topology(src: Source, smi: str, timeout_s: float, notes: list[str]) -> str | None:
    result = src.run("nvidia-smi-topo-m", [smi, "topo", "-m"], timeout_s=timeout_s)
    if not result.ok:
        notes.append(f"nvidia-smi topo -m: {tool_message(result)}")
        return None
    found = parse_topology(result.stdout)
    if found is None:
        notes.append("nvidia-smi topo -m: no GPU matrix in its output")
    return found


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
