"""The typed facts cmx-detect produces, one dataclass per top-level fact.

Units are in the field names (``_bytes``, ``_mhz``, ``_mw``). Every fact serialises with
:func:`cmx_detect.convert.to_data` to the JSON shape of the facts contract; the core keys
(``os.name``, ``cpu.cores``, ``memory.total_bytes``, ``python.version``...) are kept and
cmx-detect only adds keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cmx_detect.markers import Unavailable


@dataclass(frozen=True)
class OsFacts:
    """``facts.os``: e.g. ``linux``, ``Debian GNU/Linux``, ``12``, kernel ``6.1.0``."""

    name: str
    distro: str | None
    version: str | None
    kernel: str
    arch: str
    libc: str | None
    distro_id: str | None = None
    pretty_name: str | None = None


@dataclass(frozen=True)
class CpuCaches:
    """Total cache sizes of the machine (all instances summed), in bytes; None when unknown."""

    l1d_bytes: int | None = None
    l1i_bytes: int | None = None
    l2_bytes: int | None = None
    l3_bytes: int | None = None


@dataclass(frozen=True)
class CpuFacts:
    """``facts.cpu``. ``cores`` are physical cores of all sockets, ``threads`` logical CPUs.

    ``isa`` is the subset of ``flags`` that matters for ML kernels (avx2, avx512*, amx*...).
    ``source`` says where the numbers came from (``lscpu`` or ``/proc/cpuinfo``).
    """

    vendor: str | None
    model: str | None
    sockets: int | None
    cores: int | None
    threads: int | None
    frequency_mhz: float | None
    flags: list[str] = field(default_factory=list)
    max_frequency_mhz: float | None = None
    caches: CpuCaches = field(default_factory=CpuCaches)
    isa: list[str] = field(default_factory=list)
    arch: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class MemoryFacts:
    """``facts.memory`` from ``/proc/meminfo``."""

    total_bytes: int | None
    available_bytes: int | None
    swap_total_bytes: int | None = None


@dataclass(frozen=True)
class PythonFacts:
    """``facts.python``: the interpreter cmx runs in."""

    version: str
    implementation: str
    executable: str
    prefix: str | None = None
    is_virtualenv: bool | None = None


@dataclass(frozen=True)
class CudaToolkit:
    """One CUDA toolkit found on the machine.

    ``home`` is a directory checked to contain ``include/cuda.h``; ``nvcc`` is the real
    compiler path after following symlinks and wrapper scripts; ``found_via`` lists every
    way this toolkit was reached (``PATH:/usr/local/bin/nvcc (wrapper)``, ``CUDA_HOME``...).
    """

    home: str
    version: str | None
    version_source: str | None
    nvcc: str | None
    include_dir: str
    lib_dir: str | None
    found_via: list[str] = field(default_factory=list)
    version_raw: str | None = None


@dataclass(frozen=True)
class RejectedCandidate:
    """A path that looked like a CUDA home but is not one, and why (e.g. no ``include/cuda.h``)."""

    path: str
    found_via: str
    reason: str


@dataclass(frozen=True)
class CudaSelection:
    """The toolkit cmx will use: a found toolkit, or a ``CMX_OVERRIDE_CUDA`` version."""

    version: str | None
    home: str | None
    nvcc: str | None
    source: str
    version_raw: str | None = None


@dataclass(frozen=True)
class CudaFacts:
    """``facts.cuda``: every toolkit found, the selected one (or None) and why."""

    toolkits: list[CudaToolkit]
    selected: CudaSelection | None
    reason: str
    rejected: list[RejectedCandidate] = field(default_factory=list)


@dataclass(frozen=True)
class MigDevice:
    """A MIG instance of a GPU in MIG mode; ``profile`` is its placement name (``2g.20gb``)."""

    index: int
    name: str | None
    uuid: str | None
    memory_total_bytes: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    profile: str | None = None


@dataclass(frozen=True)
class GpuDevice:
    """One GPU (``facts.gpus.devices[i]``).

    ``accelerator_tag`` is the canonical short tag (``h100``); ``accelerator_tags`` adds the
    form factor/memory forms (``h100-sxm``). ``None`` values mean the source did not say.
    """

    index: int
    vendor: str
    name: str
    uuid: str | None
    memory_total_bytes: int | None
    compute_capability: str | None
    accelerator_tag: str | None
    accelerator_tags: list[str] = field(default_factory=list)
    pci_bus_id: str | None = None
    mig_mode: str | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)
    power_limit_mw: int | None = None
    max_sm_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    pcie_generation_max: int | None = None
    pcie_link_width_max: int | None = None
    nvlink_active_links: int | None = None
    architecture: str | None = None
    pci_device_id: str | None = None
    unavailable: list[Unavailable] = field(default_factory=list)


@dataclass(frozen=True)
class GpuFacts:
    """``facts.gpus``. ``source`` is ``nvml``, ``nvidia-smi``, ``rocm-smi``, ``amd-smi`` or
    None; ``reason`` explains an empty or partial list (e.g. ``NVML Shared Library Not Found``).
    ``interconnect`` is ``nvlink`` when every device has active NVLink links, else ``pcie``."""

    devices: list[GpuDevice]
    driver_version: str | None
    cuda_driver_version: str | None
    source: str | None
    reason: str | None
    interconnect: str | None = None
    rocm_version: str | None = None
    notes: list[str] = field(default_factory=list)
    driver_version_raw: str | None = None
    cuda_driver_version_raw: str | None = None
    rocm_version_raw: str | None = None
    unavailable: list[Unavailable] = field(default_factory=list)
    visible: VisibleDevices | None = None


@dataclass(frozen=True)
class VisibleDevices:
    """The device restriction a job runs under: ``variable`` (``CUDA_VISIBLE_DEVICES``), its
    ``value``, the node indices it selects and the MIG UUIDs among them."""

    variable: str
    value: str
    indices: list[int] = field(default_factory=list)
    mig_uuids: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TorchFacts:
    """``facts.torch``: the torch importable by the running interpreter (probed in a
    subprocess, so cmx never imports torch itself). ``probe`` is ``import`` (torch was imported
    and asked) or ``version.py`` (no GPU device nodes: versions read without importing;
    ``cudnn_version`` is then unknown)."""

    installed: bool
    version: str | None = None
    cuda_build: str | None = None
    hip_build: str | None = None
    cudnn_version: int | None = None
    cuda_available: bool | None = None
    device_count: int = 0
    devices: list[str] = field(default_factory=list)
    reason: str | None = None
    probe: str | None = None


@dataclass(frozen=True)
class ContainerEngine:
    """One container engine: its CLI, whether its socket answers, versions, GPU runtimes."""

    name: str
    cli_path: str | None
    client_version: str | None
    server_version: str | None
    socket: str | None
    reachable: bool
    gpu_runtimes: list[str] = field(default_factory=list)
    reason: str | None = None


@dataclass(frozen=True)
class ContainerEngines:
    """``facts.container_engines``."""

    engines: list[ContainerEngine]
    nvidia_container_toolkit: str | None = None
