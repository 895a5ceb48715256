"""Hardware this machine lacks, from recorded tool outputs: the same parsing code as the live
path, fed by :class:`FixtureSource`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx_detect.cli import collect
from cmx_detect.convert import from_data
from cmx_detect.facts import CpuFacts, CudaFacts, GpuFacts, TorchFacts
from cmx_detect.gpus import detect_gpus
from cmx_detect.replay import FixtureSource, bundled_fixture_names, resolve_fixture

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "facts"
NVIDIA = ["h100-sxm-8x", "h200-1x", "a100-80gb-mig", "l4-1x"]


def replay(name: str, only: list[str] | None = None) -> dict:
    facts, errors, source = collect(name, only or [])
    assert errors == {} and source == f"replay:{name}"
    return facts


def gpus(name: str) -> GpuFacts:
    return from_data(GpuFacts, replay(name, ["gpus"])["gpus"], name)


def test_every_required_machine_has_a_fixture() -> None:
    assert {*NVIDIA, "mi300x-8x"} <= set(bundled_fixture_names())


def test_h100_sxm_8x_nvlink() -> None:
    facts = replay("h100-sxm-8x")
    g = from_data(GpuFacts, facts["gpus"], "gpus")
    assert g.source == "nvml" and g.driver_version == "550.54.15" and g.cuda_driver_version == "12.4"
    assert len(g.devices) == 8 and {d.name for d in g.devices} == {"NVIDIA H100 80GB HBM3"}
    assert len({d.uuid for d in g.devices}) == 8
    d0 = g.devices[0]
    assert d0.memory_total_bytes == 81559 * 2**20 and d0.compute_capability == "9.0"
    assert d0.power_limit_mw == 700_000 and d0.max_sm_clock_mhz == 1980 and d0.pcie_generation_max == 5
    assert d0.nvlink_active_links == 18 and g.interconnect == "nvlink" and d0.mig_mode == "disabled"
    assert d0.architecture == "Hopper" and d0.accelerator_tags == ["h100", "h100-sxm"]
    assert facts["accelerator"] == ["h100", "h100-sxm", "8xh100"]
    cpu = from_data(CpuFacts, facts["cpu"], "cpu")
    assert (cpu.sockets, cpu.cores, cpu.threads) == (2, 112, 224)
    assert {"amx_tile", "amx_bf16", "avx512_bf16"} <= set(cpu.isa)
    assert cpu.caches.l3_bytes == 210 * 2**20 and cpu.max_frequency_mhz == 3800.0
    cuda = from_data(CudaFacts, facts["cuda"], "cuda")
    assert cuda.selected and cuda.selected.home == "/usr/local/cuda-12.4" and cuda.selected.version == "12.4.1"
    torch = from_data(TorchFacts, facts["torch"], "torch")
    assert torch.cuda_build == "12.1" and torch.device_count == 8
    docker = facts["container_engines"]["engines"][0]
    assert docker["reachable"] and "nvidia" in docker["gpu_runtimes"]
    assert facts["container_engines"]["nvidia_container_toolkit"] == "1.15.0"
    assert (facts["os"]["distro"], facts["os"]["version"], facts["os"]["libc"]) == ("Ubuntu", "22.04", "glibc 2.35")


def test_h200_single() -> None:
    facts = replay("h200-1x")
    g = from_data(GpuFacts, facts["gpus"], "gpus")
    assert [d.name for d in g.devices] == ["NVIDIA H200"]
    assert g.devices[0].memory_total_bytes == 143771 * 2**20
    assert g.devices[0].nvlink_active_links == 0 and g.interconnect == "pcie"
    assert facts["accelerator"] == ["h200", "h200-sxm", "1xh200"]
    assert facts["cuda"]["selected"]["home"] == "/usr/local/cuda-12.8"
    assert facts["cuda"]["selected"]["source"].startswith("CUDA_HOME=")


def test_a100_80gb_mig() -> None:
    g = gpus("a100-80gb-mig")
    d = g.devices[0]
    assert d.mig_mode == "enabled" and len(d.mig_devices) == 4
    assert [m.gpu_instance_id for m in d.mig_devices] == [1, 5, 13, 14]
    assert d.mig_devices[0].name == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    assert d.mig_devices[0].memory_total_bytes == 40192 * 2**20
    assert all(m.uuid and m.uuid.startswith("MIG-") for m in d.mig_devices)
    assert d.accelerator_tags == ["a100", "a100-80gb", "a100-sxm"]
    cuda = replay("a100-80gb-mig", ["cuda"])["cuda"]
    assert cuda["selected"]["home"] == "/usr/local/cuda-12.2" and cuda["selected"]["version"] == "12.2.140"
    assert {r["path"] for r in cuda["rejected"]} == {"/usr", "/usr/local/cuda-11.8"}


def test_l4_without_nvlink_or_mig_support() -> None:
    facts = replay("l4-1x")
    d = from_data(GpuFacts, facts["gpus"], "gpus").devices[0]
    assert d.name == "NVIDIA L4" and d.compute_capability == "8.9"
    assert d.mig_mode is None and d.nvlink_active_links == 0 and d.power_limit_mw == 72_000
    assert facts["accelerator"] == ["l4", "1xl4"]
    assert facts["cuda"]["selected"] is None and facts["torch"]["installed"] is False
    assert [e["name"] for e in facts["container_engines"]["engines"]] == ["podman"]


def test_mi300x_8x_via_amd_smi_and_rocm_smi() -> None:
    facts = replay("mi300x-8x")
    g = from_data(GpuFacts, facts["gpus"], "gpus")
    assert g.source == "amd-smi" and len(g.devices) == 8 and g.rocm_version == "6.2.0"
    assert all(d.accelerator_tag == "mi300x" and d.compute_capability == "gfx942" for d in g.devices)
    assert g.devices[0].memory_total_bytes == 196592 * 2**20
    assert any("NVML Shared Library Not Found" in n for n in g.notes)
    assert facts["accelerator"] == ["mi300x", "8xmi300x"]
    assert facts["torch"]["hip_build"].startswith("6.1")
    via_rocm = detect_gpus(FixtureSource(resolve_fixture("mi300x-8x"), hide=["amd-smi"]))
    assert via_rocm.source == "rocm-smi" and via_rocm.driver_version == "6.7.0"
    assert [(d.name, d.memory_total_bytes, d.accelerator_tag) for d in via_rocm.devices] == \
        [("AMD Instinct MI300X OAM", 196592 * 2**20, "mi300x")] * 8


@pytest.mark.parametrize("name", NVIDIA)
def test_nvidia_smi_fallback_agrees_with_nvml(name: str) -> None:
    fixture = resolve_fixture(name)
    nvml = detect_gpus(FixtureSource(fixture))
    smi = detect_gpus(FixtureSource(fixture, hide=["nvml"]))
    assert smi.source == "nvidia-smi" and nvml.source == "nvml"
    assert smi.driver_version == nvml.driver_version and smi.cuda_driver_version == nvml.cuda_driver_version
    keys = ("index", "name", "uuid", "memory_total_bytes", "compute_capability", "accelerator_tags", "pci_bus_id",
            "mig_mode", "power_limit_mw", "max_sm_clock_mhz", "max_memory_clock_mhz", "pcie_generation_max",
            "architecture")
    for a, b in zip(nvml.devices, smi.devices, strict=True):
        assert {k: getattr(a, k) for k in keys} == {k: getattr(b, k) for k in keys}
        assert [m.memory_total_bytes for m in a.mig_devices] == [m.memory_total_bytes for m in b.mig_devices]
    assert any("NVML" in n for n in smi.notes)


def test_driver_without_nvml_or_nvidia_smi_reports_the_kernel_module() -> None:
    src = FixtureSource(resolve_fixture("h100-sxm-8x"), hide=["nvml", "nvidia-smi"])
    g = detect_gpus(src)
    assert g.devices == [] and g.driver_version == "550.54.15"
    assert "kernel driver 550.54.15" in (g.reason or "") and "NVML Shared Library Not Found" in (g.reason or "")


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.json")))
def test_example_facts_files_are_the_replayed_fixtures(name: str) -> None:
    """examples/facts/<name>.json is ``cmx detect --json --replay <name>``; regenerate if this fails."""
    saved = json.loads((EXAMPLES / f"{name}.json").read_text())
    facts, errors, source = collect(name, [])
    assert saved == json.loads(json.dumps({"facts": facts, "errors": errors, "source": source}))


def test_replay_accepts_a_directory_or_its_manifest(tmp_path: Path) -> None:
    fixture = resolve_fixture("l4-1x")
    assert resolve_fixture(str(fixture)) == fixture
    assert resolve_fixture(str(fixture / "fixture.json")) == fixture


def test_record_then_replay_gives_the_same_facts(tmp_path: Path) -> None:
    """`cmx detect --record` on this machine, replayed: every fact identical."""
    from cmx_detect.detectors import run_all
    from cmx_detect.record import RecordingSource

    src = RecordingSource()
    live, live_errors = run_all(src)
    fixture = src.save(tmp_path / "this-machine")
    replayed, errors = run_all(FixtureSource(fixture))
    assert errors == live_errors == {}
    assert replayed == live
    manifest = json.loads((fixture / "fixture.json").read_text())
    assert "lscpu-json" in manifest["commands"] and "python" in manifest["values"]
