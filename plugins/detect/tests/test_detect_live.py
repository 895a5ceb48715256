"""Detection on this machine, for real (no mocks): OS, CPU, memory, Python, the CUDA toolkit
behind the wrapper nvcc, no NVML, the torch CPU build, the Docker CLI without a daemon."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

import pytest

from cmx_detect.cuda import detect_cuda, resolve_nvcc
from cmx_detect.gpus import detect_accelerator, detect_gpus
from cmx_detect.source import LiveSource
from cmx_detect.system import detect_cpu, detect_memory, detect_os, detect_python, parse_os_release

HAS_NVIDIA = Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/version").exists()
WRAPPER = Path("/usr/local/bin/nvcc")


def test_os_matches_os_release_and_uname() -> None:
    facts = detect_os(LiveSource())
    release = parse_os_release(Path("/etc/os-release").read_text())
    assert facts.name == platform.system().lower()
    assert facts.distro == release["NAME"] and facts.version == release.get("VERSION_ID")
    assert platform.release().startswith(facts.kernel)
    assert facts.arch == platform.machine()
    assert facts.libc and facts.libc.startswith("glibc ")


def test_cpu_counts_match_the_os() -> None:
    facts = detect_cpu(LiveSource())
    assert facts.threads == os.cpu_count()
    assert facts.cores and 1 <= facts.cores <= facts.threads
    assert facts.sockets and facts.sockets >= 1
    assert facts.model and facts.vendor
    cpuinfo = Path("/proc/cpuinfo").read_text()
    flags = next(line for line in cpuinfo.splitlines() if line.startswith("flags")).split(":")[1].split()
    assert set(facts.isa) <= set(flags) and set(facts.isa) <= set(facts.flags)
    if "avx2" in flags:
        assert "avx2" in facts.isa


def test_cpu_caches_from_lscpu() -> None:
    if shutil.which("lscpu") is None:
        pytest.skip("lscpu (util-linux) is not installed")
    facts = detect_cpu(LiveSource())
    assert facts.source == "lscpu"
    assert facts.caches.l1d_bytes and facts.caches.l2_bytes and facts.caches.l1d_bytes % 1024 == 0


def test_memory_matches_proc_meminfo() -> None:
    facts = detect_memory(LiveSource())
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal:"))
    assert facts.total_bytes == int(line.split()[1]) * 1024
    assert facts.available_bytes is not None and 0 < facts.available_bytes <= facts.total_bytes


def test_python_is_the_running_interpreter() -> None:
    facts = detect_python(LiveSource())
    assert facts.executable == sys.executable
    assert facts.version == platform.python_version()
    assert facts.implementation == platform.python_implementation()


@pytest.mark.skipif(not WRAPPER.is_file(), reason="this machine class has /usr/local/bin/nvcc as a wrapper")
def test_wrapper_nvcc_resolves_to_the_real_toolkit() -> None:
    src = LiveSource()
    real, hops = resolve_nvcc(src, str(WRAPPER))
    assert hops == ["wrapper script"]
    assert real == os.path.realpath("/usr/local/cuda/bin/nvcc")
    facts = detect_cuda(src)
    home = os.path.realpath("/usr/local/cuda")
    assert facts.selected is not None and facts.selected.home == home
    assert Path(home, "include", "cuda.h").is_file()
    assert facts.selected.version and facts.selected.version.startswith("13.0")
    assert any(r.path == "/usr/local" and "no include/cuda.h" in r.reason for r in facts.rejected)
    assert all(Path(t.home, "include", "cuda.h").is_file() for t in facts.toolkits)


@pytest.mark.skipif(HAS_NVIDIA, reason="this test is for machines without an NVIDIA driver")
def test_no_nvml_gives_an_empty_list_with_the_reason() -> None:
    pytest.importorskip("pynvml")
    facts = detect_gpus(LiveSource())
    assert facts.devices == []
    assert facts.reason and "NVML Shared Library Not Found" in facts.reason
    assert facts.driver_version is None
    assert detect_accelerator(LiveSource(), facts) == []


def test_torch_cpu_build() -> None:
    from cmx_detect.torchinfo import detect_torch

    facts = detect_torch(LiveSource())
    try:
        import importlib.metadata as md
        version = md.version("torch")
    except md.PackageNotFoundError:
        assert not facts.installed and facts.reason
        return
    assert facts.installed and facts.version == version
    if "+cpu" in version:
        assert facts.cuda_build is None and facts.device_count == 0 and facts.cuda_available is False
    if not HAS_NVIDIA and not Path("/dev/kfd").exists():
        assert facts.probe == "version.py"  # no GPU device nodes: torch is not imported


def test_torch_probe_by_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_detect.torchinfo import detect_torch

    pytest.importorskip("torch")
    monkeypatch.setenv("CMX_TORCH_PROBE", "import")
    facts = detect_torch(LiveSource())
    light = detect_torch_light(monkeypatch)
    assert facts.probe == "import" and facts.installed
    assert (facts.version, facts.cuda_build, facts.hip_build) == (light.version, light.cuda_build, light.hip_build)
    assert facts.cuda_available is (facts.device_count > 0)


def detect_torch_light(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from cmx_detect.torchinfo import detect_torch

    monkeypatch.delenv("CMX_TORCH_PROBE")
    return detect_torch(LiveSource())


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI")
def test_docker_cli_without_daemon_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_detect.containers import detect_container_engines

    monkeypatch.delenv("DOCKER_HOST", raising=False)  # CI points it at its private daemon

    facts = detect_container_engines(LiveSource())
    docker = next(e for e in facts.engines if e.name == "docker")
    assert docker.client_version
    if not Path("/var/run/docker.sock").exists():
        assert docker.reachable is False and docker.server_version is None and docker.reason
