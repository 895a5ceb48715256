"""Canonical accelerator tags: device name (and memory where it matters) -> short tags.

Recipes say ``requires: {accelerator: h100}``; the ``accelerator`` fact lists the tags present
on the machine. Each device gets its base tag (``h100``) plus form tags (``h100-sxm``,
``a100-80gb``); the fact also holds ``<N>x<tag>`` for the exact device count (``8xh100``).
Rules are tried in order (``gh200`` before ``h200``, ``a100`` before ``a10``). The table is
documented in ``plugins/detect/README.md``; a test keeps the two in sync.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cmx_core.errors import CmxError

GIB = 1 << 30


@dataclass(frozen=True)
class Form:
    """A refinement of a base tag: chosen when ``pattern`` matches the name, or when the
    device memory is known and within ``[min_memory_gib, max_memory_gib)``."""

    tag: str
    pattern: str | None = None
    min_memory_gib: float | None = None
    max_memory_gib: float | None = None

    def matches(self, name: str, memory_bytes: int | None) -> bool:
        if self.pattern and re.search(self.pattern, name, re.IGNORECASE):
            return True
        if memory_bytes is None or (self.min_memory_gib is None and self.max_memory_gib is None):
            return False
        gib = memory_bytes / GIB
        low_ok = self.min_memory_gib is None or gib >= self.min_memory_gib
        high_ok = self.max_memory_gib is None or gib < self.max_memory_gib
        return low_ok and high_ok


@dataclass(frozen=True)
class Rule:
    tag: str
    vendor: str
    pattern: str
    examples: tuple[str, ...]
    forms: tuple[Form, ...] = field(default_factory=tuple)


_SXM = r"SXM|HBM3"
RULES: tuple[Rule, ...] = (
    Rule("gh200", "nvidia", r"\bGH200\b", ("NVIDIA GH200 480GB", "NVIDIA GH200 144G HBM3e")),
    Rule("gb200", "nvidia", r"\bGB200\b", ("NVIDIA GB200",)),
    Rule("b200", "nvidia", r"\bB200\b", ("NVIDIA B200",)),
    Rule("h200", "nvidia", r"\bH200\b", ("NVIDIA H200", "NVIDIA H200 NVL"),
         (Form("h200-nvl", r"\bNVL\b"), Form("h200-sxm", r"^NVIDIA H200$"))),
    Rule("h100", "nvidia", r"\bH100\b",
         ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"),
         (Form("h100-nvl", r"\bNVL\b"), Form("h100-pcie", r"PCIe"), Form("h100-sxm", _SXM))),
    Rule("a100", "nvidia", r"\bA100\b",
         ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB",
          "NVIDIA A100 80GB PCIe"),
         (Form("a100-80gb", r"80GB", min_memory_gib=60), Form("a100-40gb", r"40GB", max_memory_gib=60),
          Form("a100-sxm", r"SXM"), Form("a100-pcie", r"PCIe"))),
    Rule("h800", "nvidia", r"\bH800\b", ("NVIDIA H800", "NVIDIA H800 PCIe")),
    Rule("h20", "nvidia", r"\bH20\b", ("NVIDIA H20",)),
    Rule("a800", "nvidia", r"\bA800\b", ("NVIDIA A800-SXM4-80GB", "NVIDIA A800 80GB PCIe"),
         (Form("a800-sxm", r"SXM"), Form("a800-pcie", r"PCIe"))),
    Rule("a10g", "nvidia", r"\bA10G\b", ("NVIDIA A10G",)),
    Rule("a10", "nvidia", r"\bA10\b", ("NVIDIA A10",)),
    Rule("l40s", "nvidia", r"\bL40S\b", ("NVIDIA L40S",)),
    Rule("l40", "nvidia", r"\bL40\b", ("NVIDIA L40",)),
    Rule("l4", "nvidia", r"\bL4\b", ("NVIDIA L4",)),
    Rule("t4", "nvidia", r"\bT4\b", ("Tesla T4",)),
    Rule("v100", "nvidia", r"\bV100S?\b",
         ("Tesla V100-SXM2-16GB", "Tesla V100-PCIE-32GB", "Tesla V100S-PCIE-32GB"),
         (Form("v100-32gb", r"32GB", min_memory_gib=24), Form("v100-16gb", r"16GB", max_memory_gib=24),
          Form("v100-sxm", r"SXM"), Form("v100-pcie", r"PCIE"))),
    Rule("p100", "nvidia", r"\bP100\b", ("Tesla P100-PCIE-16GB", "Tesla P100-SXM2-16GB"),
         (Form("p100-sxm", r"SXM"), Form("p100-pcie", r"PCIE"))),
    Rule("k80", "nvidia", r"\bK80\b", ("Tesla K80",)),
    Rule("mi325x", "amd", r"\bMI325X\b", ("AMD Instinct MI325X",)),
    Rule("mi300x", "amd", r"\bMI300X\b", ("AMD Instinct MI300X", "AMD Instinct MI300X OAM")),
    Rule("mi300a", "amd", r"\bMI300A\b", ("AMD Instinct MI300A",)),
    Rule("mi250", "amd", r"\bMI250X?\b|\bMI200\b.*\b(?:MCM|OAM)\b",
         ("AMD Instinct MI250X", "AMD Instinct MI250", "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2"),
         (Form("mi250x", r"MI250X(?!/)"),)),
    Rule("mi210", "amd", r"\bMI210\b", ("AMD Instinct MI210",)),
    Rule("mi100", "amd", r"\bMI100\b", ("AMD Instinct MI100", "Arcturus GL-XL [Instinct MI100]")),
    Rule("mi50", "amd", r"\bMI50\b", ("AMD Instinct MI50", "Vega 20 [Radeon Instinct MI50 32GB]")),
)


# Device identity, for names the rules miss. PCI device ids (vendor 10de NVIDIA, 1002 AMD) with
# the names pci.ids gives them (Debian's pci.ids package, 2024); a tag comes from that name.
PCI_IDS: dict[str, str] = {
    "10de:102d": "Tesla K80", "10de:15f7": "Tesla P100 PCIe 12GB", "10de:15f8": "Tesla P100 PCIe 16GB",
    "10de:15f9": "Tesla P100 SXM2 16GB", "10de:1db1": "Tesla V100 SXM2 16GB", "10de:1db4": "Tesla V100 PCIe 16GB",
    "10de:1db5": "Tesla V100 SXM2 32GB", "10de:1df6": "Tesla V100S PCIe 32GB", "10de:1eb8": "Tesla T4",
    "10de:20b0": "A100 SXM4 40GB", "10de:20b2": "A100 SXM4 80GB", "10de:20b5": "A100 PCIe 80GB",
    "10de:20f1": "A100 PCIe 40GB", "10de:20f3": "A800-SXM4-80GB", "10de:20f5": "A800 80GB PCIe",
    "10de:2236": "A10", "10de:2237": "A10G", "10de:2322": "H800 PCIe", "10de:2324": "H800",
    "10de:2330": "H100 SXM5 80GB", "10de:2331": "H100 PCIe", "10de:26b5": "L40", "10de:27b8": "L4",
    "1002:66a1": "Radeon Instinct MI50 32GB", "1002:738c": "Instinct MI100", "1002:738e": "Instinct MI100",
    "1002:7408": "Instinct MI250X", "1002:740c": "Instinct MI250X/MI250", "1002:740f": "Instinct MI210",
}
# rocm-smi's "Card SKU": D65201 is the MI250X OAM of HPE Cray EX235a nodes (hyperqueue's recording).
AMD_SKUS: dict[str, str] = {"D65201": "Instinct MI250X"}
# gfx targets that name exactly one accelerator family (gfx90a is MI210 or MI250: not here).
GFX_IDS: dict[str, str] = {"gfx908": "Instinct MI100"}
# Compute capabilities of exactly one data-centre part (3.7 is GK210, only on the K80).
COMPUTE_CAPABILITIES: dict[str, str] = {"3.7": "Tesla K80"}
# NVIDIA vGPU profile names: NVIDIA H100L-2-24C, GRID A100-4C, NVIDIA A100X-40C.
_VGPU = re.compile(r"^(?P<head>.*?\b[A-Z]+\d+)[A-Z]{0,2}-(?:\d+-)?\d+[ABCQ]$", re.IGNORECASE)
_MIG_TAG = re.compile(r"^(?P<base>[a-z0-9]+)-mig(?:-(?P<profile>\d+g\.\d+gb))?$")


@dataclass(frozen=True)
class Identity:
    """What identifies a device besides its name: ``pci_device_id`` as ``vendor:device``
    (``10de:2330``), the AMD ``gfx`` target, the rocm-smi ``sku``, the ``compute_capability``."""

    pci_device_id: str | None = None
    gfx: str | None = None
    sku: str | None = None
    compute_capability: str | None = None


def known_tags() -> list[str]:
    """Every base and form tag in the table, sorted."""
    tags = {r.tag for r in RULES} | {f.tag for r in RULES for f in r.forms}
    return sorted(tags)


def is_known(tag: str) -> bool:
    """A table tag, or a generated form of an NVIDIA base tag: ``<base>-vgpu``, ``<base>-mig``,
    ``<base>-mig-<profile>`` (``a100-mig-2g.20gb``)."""
    nvidia = {r.tag for r in RULES if r.vendor == "nvidia"}
    match = _MIG_TAG.match(tag)
    return (tag in known_tags() or bool(match and match.group("base") in nvidia)
            or (tag.endswith("-vgpu") and tag.removesuffix("-vgpu") in nvidia))


def classify(name: str, memory_bytes: int | None = None, identity: Identity | None = None) -> list[str]:
    """Tags of one device, base tag first: ``classify("NVIDIA H100 80GB HBM3")`` is
    ``["h100", "h100-sxm"]``; an unknown device gives ``[]``. A vGPU profile name gets the
    GPU's base tag and ``<base>-vgpu``. A name no rule knows is looked up by identity: PCI
    device id, then gfx target, then compute capability. An AMD SKU refines the MI200 form."""
    ident = identity or Identity()
    vgpu = _VGPU.match(name.strip())
    tags = _by_name(vgpu.group("head") if vgpu else name, memory_bytes)
    if not tags:
        for table, key in ((PCI_IDS, ident.pci_device_id), (GFX_IDS, ident.gfx),
                           (COMPUTE_CAPABILITIES, ident.compute_capability)):
            if key and key.lower() in table:
                tags = _by_name(table[key.lower()], memory_bytes)
                break
    if tags and ident.sku and ident.sku.upper() in AMD_SKUS:
        tags = _by_name(AMD_SKUS[ident.sku.upper()], memory_bytes) if tags[0] == "mi250" else tags
    if tags and ident.pci_device_id and ident.pci_device_id.lower() in PCI_IDS and tags[0] == "mi250":
        tags = _by_name(PCI_IDS[ident.pci_device_id.lower()], memory_bytes)
    if vgpu and tags:
        tags = [tags[0], f"{tags[0]}-vgpu"]
    return tags


def mig_tags(base: list[str], profile: str | None) -> list[str]:
    """Tags of a MIG device of a GPU tagged ``base``: the base, its form factor (memory forms
    describe the whole GPU, not the slice, and are dropped), ``<base>-mig`` and
    ``<base>-mig-<profile>``; the profile tag first, so it is what ``<N>x`` counts."""
    if not base:
        return []
    head = base[0]
    kept = [t for t in base[1:] if not t.endswith("gb")]
    profile_tag = [f"{head}-mig-{profile.lower()}"] if profile else []
    return [*(profile_tag or [f"{head}-mig"]), head, *kept, *([f"{head}-mig"] if profile_tag else [])]


def _by_name(name: str, memory_bytes: int | None) -> list[str]:
    for rule in RULES:
        if re.search(rule.pattern, name, re.IGNORECASE):
            return [rule.tag, *_forms(rule, name, memory_bytes)]
    return []


def _forms(rule: Rule, name: str, memory_bytes: int | None) -> list[str]:
    chosen: list[str] = []
    for form in rule.forms:
        group = form.tag.split("-")[-1]
        if _memory_form(group) and any(_memory_form(c.split("-")[-1]) for c in chosen):
            continue  # one memory size per device
        if form.matches(name, memory_bytes) and not _conflicting(chosen, form):
            chosen.append(form.tag)
    return chosen


def _memory_form(suffix: str) -> bool:
    return suffix.endswith("gb")


def _conflicting(chosen: list[str], form: Form) -> bool:
    """nvl/pcie/sxm are exclusive form factors: the first match wins."""
    factors = {"nvl", "pcie", "sxm"}
    suffix = form.tag.split("-")[-1]
    return suffix in factors and any(c.split("-")[-1] in factors for c in chosen)


def accelerator_list(device_tags: list[list[str]]) -> list[str]:
    """The ``accelerator`` fact from each device's tags: distinct tags, then ``<N>x<base>``."""
    tags: list[str] = []
    counts: dict[str, int] = {}
    for dev in device_tags:
        if not dev:
            continue
        counts[dev[0]] = counts.get(dev[0], 0) + 1
        tags.extend(t for t in dev if t not in tags)
    return tags + [f"{n}x{tag}" for tag, n in counts.items()]


_OVERRIDE = re.compile(r"^(?:(\d+)x)?([a-z0-9.-]+)$")


@dataclass(frozen=True)
class OverrideSpec:
    count: int
    tag: str


class AcceleratorTagError(CmxError):
    """An accelerator tag that is not in the table (a typo like ``h10``)."""


def check_tag(tag: str, where: str) -> str:
    """``tag`` lower-cased if it is a known tag or ``<N>x<known>``; else a one-line error
    naming ``where`` (a recipe key or an environment variable) and the known tags."""
    low = tag.strip().lower()
    match = _OVERRIDE.match(low)
    if match and is_known(match.group(2)):
        return low
    raise AcceleratorTagError(
        f"{where}: unknown accelerator tag '{tag}'; known tags: {', '.join(known_tags())}")


def parse_override(value: str, where: str = "CMX_OVERRIDE_ACCELERATOR") -> list[OverrideSpec]:
    """``"8xh100"`` -> ``[OverrideSpec(8, "h100")]``; comma lists allowed; ``""`` -> no accelerator."""
    specs = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        tag = check_tag(part, f"{where}={value}")
        match = _OVERRIDE.match(tag)
        assert match is not None
        specs.append(OverrideSpec(int(match.group(1) or 1), match.group(2)))
    return specs


def override_accelerators(specs: list[OverrideSpec]) -> list[str]:
    """The ``accelerator`` fact an override stands for (``8xh100`` -> ``h100, 8xh100``)."""

    def base_of(t: str) -> str:
        if _MIG_TAG.match(t):
            return t
        return next((r.tag for r in RULES if t == r.tag or t in {f.tag for f in r.forms}), t)

    tags: list[str] = []
    counts: dict[str, int] = {}
    for spec in specs:
        base = base_of(spec.tag)
        for tag in (base, spec.tag):
            if tag not in tags:
                tags.append(tag)
        counts[base] = counts.get(base, 0) + spec.count
    return tags + [f"{n}x{tag}" for tag, n in counts.items()]
