"""Cheap fingerprints of what each detector's answer depends on, for cmx-core's fact cache.

A fingerprint is a short hash of binary paths/sizes/mtimes, driver versions and the relevant
environment (including the ``CMX_OVERRIDE_*`` values). It costs only ``stat`` calls and small
``/proc`` reads and imports nothing heavy, because cmx-core checks it on every command.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import posixpath
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # import-light: cmx-core's warm-run replay calls these by reference
    from collections.abc import Iterable

    from cmx_detect.source import Source


def _digest(parts: Iterable[object]) -> str:
    return hashlib.sha256("\n".join(map(str, parts)).encode()).hexdigest()[:16]


def stat_token(src: Source, paths: Iterable[str]) -> list[str]:
    """``path:size:mtime_ns`` of each path (``path:-`` when absent)."""
    out = []
    for path in paths:
        st = src.stat(path)
        out.append(f"{path}:{st.size}:{st.mtime_ns}" if st else f"{path}:-")
    return out


def _env(src: Source, *names: str) -> list[str]:
    return [f"{n}={src.env(n)}" for n in names] + [f"{n}={os.environ.get(n)}" for n in _OVERRIDES]


_OVERRIDES = ("CMX_OVERRIDE_ACCELERATOR", "CMX_OVERRIDE_CUDA")


# -- fingerprints ---------------------------------------------------------------------------

def fp_os(src: Source) -> str:
    return _digest([*stat_token(src, ["/etc/os-release"]), src.read_text("/proc/sys/kernel/osrelease")])


def fp_cpu(src: Source) -> str:
    return _digest([src.read_text("/proc/sys/kernel/osrelease"), os.cpu_count(),
                    *stat_token(src, ["/sys/devices/system/cpu/online"]),
                    src.read_text("/sys/devices/system/cpu/online")])


def fp_memory(src: Source) -> str:
    text = src.read_text("/proc/meminfo") or ""
    return _digest([line for line in text.splitlines() if line.startswith(("MemTotal", "SwapTotal"))])


def fp_python(src: Source) -> str:
    return _digest([sys.executable, sys.version, *stat_token(src, [sys.executable])])


CUDA_ENV_HOMES = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")
CUDA_STANDARD_ROOTS = ("/usr/local", "/opt")


def cuda_paths(src: Source) -> list[str]:
    """Paths whose path/size/mtime identify the CUDA setup."""
    paths = list(src.which_all("nvcc"))
    for var in CUDA_ENV_HOMES:
        if src.env(var):
            paths.append(posixpath.join(src.env(var) or "", "bin", "nvcc"))
    for root in CUDA_STANDARD_ROOTS:
        for name in src.listdir(root):
            if name == "cuda" or name.startswith("cuda-"):
                base = posixpath.join(root, name)
                paths += [base, posixpath.join(base, "version.json"), posixpath.join(base, "bin", "nvcc")]
    return paths


def fp_cuda(src: Source) -> str:
    return _digest([*_env(src, "PATH", *CUDA_ENV_HOMES), *stat_token(src, cuda_paths(src))])


_GPU_TOOLS = ("nvidia-smi", "rocm-smi", "amd-smi")
VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def fp_gpus(src: Source) -> str:
    """Driver version (``/proc/driver/nvidia/version``), device nodes, tools, libraries."""
    tools = [p for t in _GPU_TOOLS for p in src.which_all(t)]
    nodes = [n for n in src.listdir("/dev") if n.startswith(("nvidia", "kfd"))]
    try:
        spec = importlib.util.find_spec("pynvml")
    except (ImportError, ValueError):
        spec = None
    libs = ["/etc/ld.so.cache", "/opt/rocm/.info/version", *([spec.origin] if spec and spec.origin else [])]
    return _digest([src.read_text("/proc/driver/nvidia/version"), *nodes, *_env(src, "PATH", *VISIBILITY_VARS),
                    *stat_token(src, tools + libs)])


def torch_paths() -> list[str]:
    """torch's ``version.py`` (changes with every install), found without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [f"{next(iter(spec.submodule_search_locations))}/version.py"]


def fp_torch(src: Source) -> str:
    """The interpreter, torch's version.py, GPU device nodes (they decide how torch is probed)."""
    nodes = [n for n in src.listdir("/dev") if n.startswith(("nvidia", "kfd", "dxg"))]
    return _digest([sys.executable, os.environ.get("CMX_TORCH_PROBE"), *nodes, *stat_token(src, torch_paths())])


def fp_containers(src: Source) -> str:
    clis = [p for t in ("docker", "podman", "nvidia-ctk") for p in src.which_all(t)]
    sockets = ["/var/run/docker.sock", "/run/podman/podman.sock", "/etc/cdi/nvidia.yaml"]
    return _digest([*_env(src, "PATH", "DOCKER_HOST"), *stat_token(src, clis + sockets)])
