"""Each defect of issue #20 against a real recording (tests/recordings, see SOURCES.md) or a
file reproducing its structure: fallbacks that degrade field by field, the tool's own words in
the reason, markers as null, normalised versions, what a job can use, tags by identity."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cmx_detect.amd import parse_rocm_smi
from cmx_detect.detectors import run_all
from cmx_detect.gpus import accelerator_from, detect_gpus, visible_gpus
from cmx_detect.replay import FixtureSource, resolve_fixture
from cmx_detect.smi import parse_list, parse_smi_xml, parse_topology
from cmx_detect.tags import classify
from cmx_detect.versions import normalise

REC = Path(__file__).parent / "recordings"
SMI = "/usr/bin/nvidia-smi"


def machine(tmp_path: Path, commands: dict[str, dict[str, Any]], env: dict[str, str] | None = None,
            files: tuple[str, ...] = ()) -> FixtureSource:
    """A fixture directory with nvidia-smi on PATH, no NVML, and these recorded commands."""
    for name in files:
        shutil.copy(REC / name, tmp_path / name)
    manifest = {"env": {"PATH": "/usr/bin", **(env or {})}, "commands": commands,
                "files": {SMI: {"text": ""}}}
    (tmp_path / "fixture.json").write_text(json.dumps(manifest))
    return FixtureSource(tmp_path)


def test_query_gpu_without_compute_cap_falls_back_to_the_xml(tmp_path: Path) -> None:
    src = machine(tmp_path, {
        "nvidia-smi-query-gpu": {"stdout": "structure-470-query-gpu-stdout.txt", "rc": 2},
        "nvidia-smi-q-x": {"stdout": "telegraf-tesla-t4.xml", "rc": 0},
    }, files=("structure-470-query-gpu-stdout.txt", "telegraf-tesla-t4.xml"))
    gpus = detect_gpus(src)
    assert [(d.name, d.accelerator_tags, d.uuid) for d in gpus.devices] == [
        ("Tesla T4", ["t4"], "GPU-d37e67a5-91dd-3774-a5cb-99096249601a")]
    assert gpus.devices[0].memory_total_bytes == 15360 * 2**20 and gpus.driver_version == "515.105.01"
    assert gpus.cuda_driver_version == "11.7"
    assert any('exited with 2: Field "compute_cap" is not a valid field to query.' in n for n in gpus.notes)
    assert "compute_capability" not in {u.field for u in gpus.devices[0].unavailable}  # the XML has no such field


def test_infoROM_warning_exit_14_keeps_the_data(tmp_path: Path) -> None:
    csv = (resolve_fixture("h100-sxm-8x") / "nvidia-smi-query-gpu.csv").read_text()
    src = machine(tmp_path, {"nvidia-smi-query-gpu": {
        "stdout_text": csv + "WARNING: infoROM is corrupted at gpu 0000:18:00.0\n", "rc": 14}})
    gpus = detect_gpus(src)
    assert len(gpus.devices) == 8 and gpus.devices[0].compute_capability == "9.0"
    assert any("exited with 14: WARNING: infoROM is corrupted at gpu 0000:18:00.0" in n for n in gpus.notes)


def test_only_nvidia_smi_L_still_lists_the_gpus_and_mig_devices(tmp_path: Path) -> None:
    src = machine(tmp_path, {
        "nvidia-smi-query-gpu": {"stdout_text": "", "stderr_text": "Unknown Error\n", "rc": 255},
        "nvidia-smi-q-x": {"stdout_text": "", "rc": 255, "stderr_text": "Unknown Error\n"},
        "nvidia-smi-L": {"stdout": "structure-a100-mig-L.txt", "rc": 0}}, files=("structure-a100-mig-L.txt",))
    gpus = detect_gpus(src)
    (dev,) = gpus.devices
    assert dev.name == "NVIDIA A100-SXM4-80GB" and dev.mig_mode == "enabled"
    assert [m.profile for m in dev.mig_devices] == ["2g.20gb"] * 4
    assert "nvidia-smi --query-gpu: nvidia-smi exited with 255: Unknown Error" in gpus.notes
    assert accelerator_from(gpus)[-1] == "4xa100-mig-2g.20gb"


def test_every_view_failing_gives_the_tools_words(tmp_path: Path) -> None:
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    src = machine(tmp_path, {p: {"stdout_text": said + "\n", "rc": 9}
                             for p in ("nvidia-smi-query-gpu", "nvidia-smi-q-x", "nvidia-smi-L")})
    gpus = detect_gpus(src)
    assert gpus.devices == [] and gpus.reason == f"nvidia-smi failed: nvidia-smi exited with 9: {said}"


def test_real_a100_mig_xml_and_L_merged(tmp_path: Path) -> None:
    src = machine(tmp_path, {
        "nvidia-smi-query-gpu": {"stdout": "structure-470-query-gpu-stdout.txt", "rc": 2},
        "nvidia-smi-q-x": {"stdout": "telegraf-a100-sxm4-v12.xml", "rc": 0},
        "nvidia-smi-L": {"stdout": "structure-a100-mig-L.txt", "rc": 0}},
        files=("structure-470-query-gpu-stdout.txt", "telegraf-a100-sxm4-v12.xml", "structure-a100-mig-L.txt"))
    gpus = detect_gpus(src)
    (dev,) = gpus.devices
    assert dev.pci_device_id == "10de:20b2" and dev.architecture == "Ampere"
    assert next((m.profile, m.memory_total_bytes, m.gpu_instance_id, m.uuid) for m in dev.mig_devices) == \
        ("2g.20gb", 19968 * 2**20, 3, "MIG-00000000-0000-0000-0000-000000000000")
    tags = accelerator_from(gpus)
    assert "a100-80gb" not in tags and "1xa100" not in tags
    assert tags == ["a100-mig-2g.20gb", "a100", "a100-sxm", "a100-mig", "4xa100-mig-2g.20gb"]
    one = visible_gpus(machine(tmp_path, {}, env={"CUDA_VISIBLE_DEVICES": "MIG-00000000-0000-0000-0000-000000000002"}),
                       gpus)
    assert accelerator_from(one)[-1] == "1xa100-mig-2g.20gb" and one.visible is not None
    assert one.visible.mig_uuids == ["MIG-00000000-0000-0000-0000-000000000002"]
    old_style = visible_gpus(machine(tmp_path, {}, env={
        "CUDA_VISIBLE_DEVICES": "MIG-GPU-513536b6-7d19-9063-b049-1e69664bb298/4/0"}), gpus)
    assert [m.gpu_instance_id for m in old_style.devices[0].mig_devices] == [4]


def test_k80_not_found_markers_are_null_with_a_reason() -> None:
    report = parse_smi_xml((REC / "structure-k80-q-x.xml").read_text())
    assert report.cuda is None and [(u.field, u.reason) for u in report.unavailable] == [
        ("cuda_driver_version", "nvidia-smi -q -x printed 'Not Found'")]
    assert [d.accelerator_tags for d in report.devices] == [["k80"], ["k80"]]
    assert report.devices[0].power_limit_mw == 149000


def test_a10g_without_a_device_id_still_tags_by_name() -> None:
    (dev,) = parse_smi_xml((REC / "telegraf-a10g.xml").read_text()).devices
    assert dev.pci_device_id is None and dev.accelerator_tags == ["a10g"]


def test_rocm_smi_571_mi100_uuid_na_is_null_with_a_reason() -> None:
    devices, driver = parse_rocm_smi((REC / "telegraf-mi100_rocm571.json").read_text())
    assert len(devices) == 6 and driver == "6.2.4"
    assert {d.uuid for d in devices} == {None}
    assert devices[0].unavailable[0].field == "uuid" and "'N/A'" in devices[0].unavailable[0].reason
    assert {tuple(d.accelerator_tags) for d in devices} == {("mi100",)} and devices[0].pci_device_id == "1002:738c"
    assert devices[0].memory_total_bytes == 34342961152


def test_real_mi250x_node_gets_mi250_and_mi250x_by_sku() -> None:
    devices, _ = parse_rocm_smi((REC / "hyperqueue-mi200-rocm-smi.json").read_text())
    assert [d.accelerator_tags for d in devices] == [["mi250", "mi250x"]] * 2
    assert classify("Aldebaran/MI200 [Instinct MI250X/MI250]") == ["mi250"]


def test_rocr_and_hip_visible_devices(tmp_path: Path) -> None:
    node = detect_gpus(FixtureSource(resolve_fixture("mi300x-8x")))
    src = machine(tmp_path, {}, env={"ROCR_VISIBLE_DEVICES": "2,3,4,5", "HIP_VISIBLE_DEVICES": "3,4"})
    job = visible_gpus(src, node)
    assert [d.index for d in job.devices] == [3, 4] and accelerator_from(job) == ["mi300x", "2xmi300x"]


@pytest.mark.parametrize(("value", "indices", "tag"), [
    ("0,1", [0, 1], "2xh100"), ("GPU-20ec7b93", [0], "1xh100"), ("", [], None), ("0,7,bogus,3", [0, 7], "2xh100"),
])
def test_slurm_like_cuda_visible_devices_on_8x_h100(tmp_path: Path, value: str, indices: list[int],
                                                   tag: str | None) -> None:
    fixture = tmp_path / "h100"
    shutil.copytree(resolve_fixture("h100-sxm-8x"), fixture)
    manifest = json.loads((fixture / "fixture.json").read_text())
    manifest["env"].update({"CUDA_VISIBLE_DEVICES": value, "SLURM_JOB_ID": "42", "SLURM_GPUS_ON_NODE": "2"})
    (fixture / "fixture.json").write_text(json.dumps(manifest))
    facts, errors = run_all(FixtureSource(fixture), ["gpus", "node_gpus", "accelerator"])
    assert errors == {}
    assert [d["index"] for d in facts["gpus"]["devices"]] == indices and len(facts["node_gpus"]["devices"]) == 8
    assert (facts["accelerator"][-1] if facts["accelerator"] else None) == tag
    if value == "0,7,bogus,3":
        assert facts["gpus"]["visible"]["ignored"] == ["bogus", "3"]
    if value == "":
        assert "leaves no device of the 8" in facts["gpus"]["reason"]


def test_topology_from_topo_m() -> None:
    assert parse_topology((REC / "structure-h100-8x-topo-m.txt").read_text()) == "nvswitch"
    assert parse_topology((REC / "structure-2x-pcie-topo-m.txt").read_text()) == "pcie"
    assert parse_topology("no matrix here") is None


def test_fallback_reads_topo_m(tmp_path: Path) -> None:
    fixture = resolve_fixture("h100-sxm-8x")
    src = machine(tmp_path, {
        "nvidia-smi-query-gpu": {"stdout_text": (fixture / "nvidia-smi-query-gpu.csv").read_text(), "rc": 0},
        "nvidia-smi-topo-m": {"stdout": "structure-h100-8x-topo-m.txt", "rc": 0}},
        files=("structure-h100-8x-topo-m.txt",))
    assert detect_gpus(src).interconnect == "nvswitch"


@pytest.mark.parametrize(("raw", "version"), [
    ("11.8.20220929", "11.8"), ("12.4.1", "12.4.1"), ("12.4.131", "12.4.131"), ("535.183.01", "535.183.01"),
    ("6.2.0-66", "6.2.0"), ("Not Found", None),
])
def test_versions_normalised_raw_kept(raw: str, version: str | None) -> None:
    assert normalise(raw).version == version and normalise(raw).raw == raw


def test_runfile_version_json_with_a_date(tmp_path: Path) -> None:
    from cmx_detect.cuda import detect_cuda

    manifest = {"env": {"PATH": "/usr/bin"}, "files": {
        "/usr/local/cuda-11.8/include/cuda.h": {"text": "#define CUDA_VERSION 11080\n"},
        "/usr/local/cuda-11.8/version.json": {"text": json.dumps({"cuda": {"version": "11.8.20220929"}})}}}
    (tmp_path / "fixture.json").write_text(json.dumps(manifest))
    cuda = detect_cuda(FixtureSource(tmp_path))
    assert cuda.selected is not None and (cuda.selected.version, cuda.selected.version_raw) == ("11.8", "11.8.20220929")


@pytest.mark.parametrize(("name", "tags"), [
    ("NVIDIA H100L-2-24C", ["h100", "h100-vgpu"]), ("NVIDIA H800", ["h800"]), ("NVIDIA H20", ["h20"]),
    ("NVIDIA A800-SXM4-80GB", ["a800", "a800-sxm"]), ("Tesla P100-PCIE-16GB", ["p100", "p100-pcie"]),
    ("Tesla K80", ["k80"]), ("AMD Instinct MI50", ["mi50"]), ("Arcturus GL-XL [Instinct MI100]", ["mi100"]),
])
def test_missing_families(name: str, tags: list[str]) -> None:
    assert classify(name) == tags


def test_tags_by_identity_when_the_name_is_unknown() -> None:
    from cmx_detect.tags import Identity

    assert classify("Graphics Device", identity=Identity(pci_device_id="10de:2330")) == ["h100", "h100-sxm"]
    assert classify("AMD Instinct", identity=Identity(gfx="gfx908")) == ["mi100"]
    assert classify("Device", identity=Identity(compute_capability="3.7")) == ["k80"]
    assert classify("AMD Radeon Graphics", identity=Identity(pci_device_id="1002:7408")) == ["mi250", "mi250x"]


def test_list_and_xml_parsers_refuse_garbage() -> None:
    from cmx_detect.smi import ParseError

    with pytest.raises(ParseError):
        parse_list("No devices were found\n")
    with pytest.raises(ParseError):
        parse_smi_xml("<html/>")
