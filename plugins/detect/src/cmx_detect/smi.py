"""The ``nvidia-smi`` fallback, degrading field by field.

``--query-gpu`` CSV first; where it fails (an nvidia-smi older than the ``compute_cap`` field
exits 2 and says so on stdout), ``-q -x`` gives name, UUID, memory, MIG, driver and CUDA; where
both fail, ``-L`` still lists the GPUs and their MIG devices. An exit status that comes with
data (14: "WARNING: infoROM is corrupted", the data still printed) keeps the data and the
warning. ``-L`` names MIG devices (profile, UUID); ``topo -m`` gives the interconnect.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from typing import Any

from cmx_detect.facts import GpuDevice, MigDevice
from cmx_detect.markers import FieldReader, Unavailable
from cmx_detect.source import ProbeResult
from cmx_detect.tags import Identity, classify

MIB = 1 << 20
QUERY_FIELDS = (
    "index", "name", "uuid", "memory.total", "compute_cap", "mig.mode.current", "power.limit",
    "clocks.max.sm", "clocks.max.memory", "pcie.link.gen.max", "pcie.link.width.max",
    "pci.bus_id", "driver_version",
)
QUERY_ARGV = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_WARNING = re.compile(r"^\s*(WARNING|Warning):")


class ParseError(ValueError):
    """Output of a tool that does not have the expected format."""


@dataclass(frozen=True)
class SmiReport:
    """What one nvidia-smi view gave: devices, driver and CUDA text, and notes."""

    devices: list[GpuDevice]
    driver: str | None = None
    cuda: str | None = None
    notes: list[str] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)


def device(index: int, name: str, identity: Identity | None = None, **kw: Any) -> GpuDevice:
    """A :class:`GpuDevice` with its accelerator tags filled from name, memory and identity."""
    tags = classify(name, kw.get("memory_total_bytes"), identity)
    return GpuDevice(index=index, name=name, accelerator_tag=tags[0] if tags else None,
                     accelerator_tags=tags, **kw)


def retag(dev: GpuDevice) -> GpuDevice:
    """``dev`` with its tags recomputed (after another view filled memory or the PCI id)."""
    ident = Identity(pci_device_id=dev.pci_device_id, compute_capability=dev.compute_capability)
    tags = classify(dev.name, dev.memory_total_bytes, ident)
    return replace(dev, accelerator_tag=tags[0] if tags else None, accelerator_tags=tags)


def tool_message(result: ProbeResult) -> str:
    """Why a probe failed, in the tool's own words from stderr or, failing that, stdout."""
    if result.error:
        return result.error
    err = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
    out = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
    warned = [ln for ln in out if _WARNING.match(ln)]
    said = next(iter(err + warned + [ln for ln in out if not ln.startswith("<")]), "")
    name = result.argv[0].rsplit("/", 1)[-1]
    return f"{name} exited with {result.returncode}" + (f": {said[:200]}" if said else "")


def _num(reader: FieldReader, name: str, raw: Any, cast: Any = int) -> Any:
    text = reader.text(name, raw)
    if text is None:
        return None
    match = re.match(r"^[-+]?\d+(?:\.\d+)?", text)
    if not match:
        raise ParseError(f"{name}: not a number: {text!r}")
    return cast(float(match.group(0))) if cast is int else cast(match.group(0))


def _mem_bytes(reader: FieldReader, name: str, raw: Any) -> int | None:
    mib = _num(reader, name, raw)
    return int(mib) * MIB if mib is not None else None


def _pci_id(raw: str | None) -> str | None:
    """nvidia-smi's ``233010DE`` (device, vendor) as ``10de:2330``."""
    text = (raw or "").strip().lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{8}", text) or text[4:] != "10de" or text[:4] == "0000":
        return None  # telegraf's A10G recording holds 000000DE: no device id
    return f"{text[4:]}:{text[:4]}"


def _data_lines(text: str) -> tuple[list[str], list[str]]:
    """CSV lines and the warning lines nvidia-smi mixed into them."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return [ln for ln in lines if not _WARNING.match(ln)], [ln.strip() for ln in lines if _WARNING.match(ln)]


# -- --query-gpu -----------------------------------------------------------------------------

def parse_query_csv(text: str) -> SmiReport:
    """Parse ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``."""
    data, warnings = _data_lines(text)
    rows = [r for r in csv.reader(io.StringIO("\n".join(data)), skipinitialspace=True) if r]
    if not rows:
        raise ParseError("no rows")
    devices, driver = [], None
    missing: list[Unavailable] = []
    for row in rows:
        if len(row) != len(QUERY_FIELDS):
            raise ParseError(f"expected {len(QUERY_FIELDS)} columns, got {len(row)}: {','.join(row)[:80]!r}")
        f = dict(zip(QUERY_FIELDS, (c.strip() for c in row), strict=True))
        r = FieldReader("nvidia-smi --query-gpu")
        power_w = _num(r, "power_limit_mw", f["power.limit"], float)
        mig = r.text("mig_mode", f["mig.mode.current"])
        name = r.text("name", f["name"]) or "unknown NVIDIA GPU"
        devices.append(device(
            _num(r, "index", f["index"]), name, vendor="nvidia", uuid=r.text("uuid", f["uuid"]),
            memory_total_bytes=_mem_bytes(r, "memory_total_bytes", f["memory.total"]),
            compute_capability=r.text("compute_capability", f["compute_cap"]),
            pci_bus_id=r.text("pci_bus_id", f["pci.bus_id"]), mig_mode=mig.lower() if mig else None,
            power_limit_mw=int(power_w * 1000) if power_w is not None else None,
            max_sm_clock_mhz=_num(r, "max_sm_clock_mhz", f["clocks.max.sm"]),
            max_memory_clock_mhz=_num(r, "max_memory_clock_mhz", f["clocks.max.memory"]),
            pcie_generation_max=_num(r, "pcie_generation_max", f["pcie.link.gen.max"]),
            pcie_link_width_max=_num(r, "pcie_link_width_max", f["pcie.link.width.max"]),
            unavailable=r.unavailable,
        ))
        top = FieldReader("nvidia-smi --query-gpu")
        driver = top.text("driver_version", f["driver_version"]) or driver
        missing = missing or top.unavailable
    return SmiReport(devices, driver=driver, notes=warnings, unavailable=missing if driver is None else [])


# -- -q -x -----------------------------------------------------------------------------------

def parse_smi_xml(text: str) -> SmiReport:
    """Every GPU of ``nvidia-smi -q -x`` with what the XML says (no compute capability: the
    XML has none), the driver and CUDA versions; warning lines around the XML are notes."""
    start, end = text.find("<nvidia_smi_log"), text.rfind("</nvidia_smi_log>")
    body = text[start:end + len("</nvidia_smi_log>")] if start >= 0 and end > start else text
    try:
        root = ET.fromstring(body)
    except ET.ParseError as err:
        raise ParseError(f"not XML: {err}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"unexpected root element <{root.tag}>")
    top = FieldReader("nvidia-smi -q -x")
    driver = top.text("driver_version", root.findtext("driver_version"))
    cuda = top.text("cuda_driver_version", root.findtext("cuda_version"))
    devices = [_xml_gpu(i, gpu) for i, gpu in enumerate(root.findall("gpu"))]
    notes = [ln.strip() for ln in (text[:max(start, 0)] + text[end + 17:]).splitlines() if ln.strip()] \
        if start >= 0 and end > start else []
    return SmiReport(devices, driver=driver, cuda=cuda, notes=notes, unavailable=top.unavailable)


def _first(gpu: ET.Element, *paths: str) -> str | None:
    for path in paths:
        node = gpu.find(path)
        if node is not None and node.text is not None:
            return node.text
    return None


def _xml_gpu(index: int, gpu: ET.Element) -> GpuDevice:
    r = FieldReader("nvidia-smi -q -x")
    name = r.text("name", gpu.findtext("product_name")) or "unknown NVIDIA GPU"
    mig = r.text("mig_mode", _first(gpu, "mig_mode/current_mig"))
    power_w = _num(r, "power_limit_mw", _first(gpu, "gpu_power_readings/current_power_limit",
                                                 "power_readings/power_limit"), float)
    width = _num(r, "pcie_link_width_max", _first(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width"))
    mem = _mem_bytes(r, "memory_total_bytes", gpu.findtext("fb_memory_usage/total"))
    pci_id = _pci_id(gpu.findtext("pci/pci_device_id"))
    return device(
        index, name, Identity(pci_device_id=pci_id), vendor="nvidia", uuid=r.text("uuid", gpu.findtext("uuid")),
        memory_total_bytes=mem, compute_capability=None,
        pci_bus_id=r.text("pci_bus_id", _first(gpu, "pci/pci_bus_id")) or gpu.get("id"),
        mig_mode=mig.lower() if mig else None,
        mig_devices=[_xml_mig(i, m) for i, m in enumerate(gpu.findall("mig_devices/mig_device"))],
        power_limit_mw=int(power_w * 1000) if power_w is not None else None,
        max_sm_clock_mhz=_num(r, "max_sm_clock_mhz", _first(gpu, "max_clocks/sm_clock")),
        max_memory_clock_mhz=_num(r, "max_memory_clock_mhz", _first(gpu, "max_clocks/mem_clock")),
        pcie_generation_max=_num(r, "pcie_generation_max", _first(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        pcie_link_width_max=width, architecture=r.text("architecture", gpu.findtext("product_architecture")),
        pci_device_id=pci_id, unavailable=r.unavailable,
    )


def _xml_mig(i: int, node: ET.Element) -> MigDevice:
    r = FieldReader("nvidia-smi -q -x")
    return MigDevice(index=_num(r, "index", node.findtext("index")) if node.findtext("index") else i,
                     name=None, uuid=None,
                     memory_total_bytes=_mem_bytes(r, "memory_total_bytes", node.findtext("fb_memory_usage/total")),
                     gpu_instance_id=_num(r, "gpu_instance_id", node.findtext("gpu_instance_id")),
                     compute_instance_id=_num(r, "compute_instance_id", node.findtext("compute_instance_id")))


# -- -L --------------------------------------------------------------------------------------

_L_GPU = re.compile(r"^GPU\s+(\d+):\s*(.+?)\s*\(UUID:\s*([^)]+?)\s*\)\s*$")
_L_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*([^)]+?)\s*\)\s*$")


def parse_list(text: str) -> SmiReport:
    """``nvidia-smi -L``: ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)`` and its
    ``  MIG 2g.20gb Device 0: (UUID: MIG-...)`` lines."""
    devices: list[GpuDevice] = []
    for line in text.splitlines():
        gpu, mig = _L_GPU.match(line), _L_MIG.match(line)
        if gpu:
            devices.append(device(int(gpu.group(1)), gpu.group(2), vendor="nvidia", uuid=gpu.group(3),
                                  memory_total_bytes=None, compute_capability=None))
        elif mig and devices:
            last = devices[-1]
            slot = MigDevice(index=int(mig.group(2)), name=f"{last.name} MIG {mig.group(1)}", uuid=mig.group(3),
                             memory_total_bytes=None, profile=mig.group(1))
            devices[-1] = replace(last, mig_mode="enabled", mig_devices=[*last.mig_devices, slot])
    if not devices:
        raise ParseError("no 'GPU <n>: <name> (UUID: ...)' lines")
    return SmiReport(devices)


# -- topo -m ---------------------------------------------------------------------------------

def parse_topology(text: str) -> str | None:
    """``nvidia-smi topo -m`` as ``nvswitch`` (more than four GPUs, every pair NVLinked: only a
    switch connects that many), ``nvlink`` (every GPU has an NVLink peer), ``pcie`` or None."""
    lines = [_ANSI.sub("", ln) for ln in text.splitlines() if ln.strip()]
    header = next((ln.split() for ln in lines if ln.split()[:1] == ["GPU0"]), None)
    if header is None:
        return None
    gpus = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    rows = {ln.split()[0]: ln.split()[1:1 + len(gpus)] for ln in lines if re.match(r"^GPU\d+\s", ln)}
    if len(gpus) < 2 or len(rows) < len(gpus):
        return None
    links = {(a, b): cell for a in gpus for b, cell in zip(gpus, rows.get(a, []), strict=False) if a != b}
    nv = {pair for pair, cell in links.items() if cell.startswith("NV")}
    if len(gpus) > 4 and len(nv) == len(links):
        return "nvswitch"
    if all(any((a, b) in nv for b in gpus if b != a) for a in gpus):
        return "nvlink"
    return "pcie"
