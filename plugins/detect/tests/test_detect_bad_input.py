"""Bad input never crashes detection and never hangs it: malformed facts files and fixtures
are one-line errors, hanging probes time out, garbage output becomes a reason."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cmx_core.errors import CmxError
from cmx_detect.convert import FactsError, from_data
from cmx_detect.facts import GpuFacts
from cmx_detect.factsfile import load_facts_file
from cmx_detect.nvidia import detect_nvidia
from cmx_detect.replay import FixtureSource, resolve_fixture
from cmx_detect.source import LiveSource, run_command
from cmx_detect.system import detect_cpu
from cmx_detect.torchinfo import detect_torch


def test_malformed_facts_file_json(tmp_path: Path) -> None:
    bad = tmp_path / "facts.json"
    bad.write_text('{"facts": {"gpus": [}')
    with pytest.raises(CmxError, match=r"facts.json:1: not valid JSON") as err:
        load_facts_file(bad)
    assert "\n" not in str(err.value)


def test_facts_file_with_wrong_shape_names_the_key(tmp_path: Path) -> None:
    doc = json.loads((Path(__file__).resolve().parents[3] / "examples/facts/h100-sxm-8x.json").read_text())
    doc["facts"]["gpus"]["devices"][3]["memory_total_bytes"] = "80GB"
    bad = tmp_path / "h100.json"
    bad.write_text(json.dumps(doc))
    message = r"h100.json: facts.gpus.devices\[3\].memory_total_bytes: expected int, got str"
    with pytest.raises(FactsError, match=message):
        load_facts_file(bad)
    bad.write_text(json.dumps({"gpus": []}))
    with pytest.raises(FactsError, match="expected an object with a 'facts' object"):
        load_facts_file(bad)
    bad.write_text(json.dumps({"facts": {"accelerator": "h100"}}))
    with pytest.raises(FactsError, match=r"facts.accelerator: expected a list of tags"):
        load_facts_file(bad)


def test_facts_file_with_an_unknown_accelerator_tag(tmp_path: Path) -> None:
    bad = tmp_path / "f.json"
    bad.write_text(json.dumps({"facts": {"accelerator": ["h10"]}}))
    message = r"f.json: facts.accelerator\[0\]: unknown accelerator tag 'h10'; known tags: a10, "
    with pytest.raises(CmxError, match=message):
        load_facts_file(bad)


def test_valid_facts_files_load_typed(tmp_path: Path) -> None:
    for path in (Path(__file__).resolve().parents[3] / "examples/facts").glob("*.json"):
        typed = load_facts_file(path)
        assert isinstance(typed["gpus"], GpuFacts) and typed["gpus"].devices


def test_missing_required_key_in_a_fact() -> None:
    with pytest.raises(FactsError, match=r"x.gpus: missing key 'devices'"):
        from_data(GpuFacts, {"driver_version": None}, "x.gpus")


def test_malformed_fixture_manifest(tmp_path: Path) -> None:
    (tmp_path / "fixture.json").write_text('{"commands": {"x": 1},\n "bogus": 2}')
    with pytest.raises(FactsError, match=r"fixture.json: unknown key 'bogus'"):
        FixtureSource(tmp_path)
    (tmp_path / "fixture.json").write_text('{"commands": ')
    with pytest.raises(FactsError, match=r"fixture.json:1: not valid JSON"):
        FixtureSource(tmp_path)
    with pytest.raises(FactsError, match=r"--replay nowhere: no such fixture .* bundled fixtures: a100-80gb-mig"):
        resolve_fixture("nowhere")


def test_garbage_nvml_recording(tmp_path: Path) -> None:
    (tmp_path / "fixture.json").write_text(json.dumps({"nvml": "nvml.json"}))
    (tmp_path / "nvml.json").write_text("[1, 2")
    with pytest.raises(FactsError, match=r"nvml.json: not valid JSON"):
        detect_nvidia(FixtureSource(tmp_path))


def test_probe_that_hangs_times_out_and_kills_its_children(tmp_path: Path, exe) -> None:
    marker = tmp_path / "grandchild-alive"
    script = exe(tmp_path / "hang", f"#!/bin/sh\n(sleep 30; touch {marker}) &\nsleep 30\n")
    start = time.monotonic()
    result = run_command([str(script)], timeout_s=0.5)
    assert result.timed_out and result.error == "hang timed out after 0.5 s" and not result.ok
    assert time.monotonic() - start < 20  # bounded: the group was killed, not waited for
    assert not marker.exists()


def test_hanging_nvidia_smi_gives_a_reason_not_a_hang(tmp_path: Path, exe, only_path) -> None:
    exe(tmp_path / "nvidia-smi", "#!/bin/sh\nsleep 30\n")
    only_path(tmp_path)
    facts = detect_nvidia(LiveSource(), timeout_s=0.5)
    assert facts.devices == [] and facts.source == "nvidia-smi"
    assert "nvidia-smi timed out after 0.5 s" in (facts.reason or "")


def test_nvidia_smi_printing_garbage(tmp_path: Path, exe, only_path) -> None:
    exe(tmp_path / "nvidia-smi", "#!/bin/sh\necho 'Segmentation fault, core dumped <<<>>>'\n")
    only_path(tmp_path)
    facts = detect_nvidia(LiveSource(), timeout_s=5)
    assert facts.devices == [] and "cannot parse nvidia-smi --query-gpu output" in (facts.reason or "")


def test_nvidia_smi_failing_names_its_error(tmp_path: Path, exe, only_path) -> None:
    exe(tmp_path / "nvidia-smi",
        "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch' >&2\nexit 18\n")
    only_path(tmp_path)
    facts = detect_nvidia(LiveSource(), timeout_s=5)
    assert facts.devices == []
    assert "exited with 18: Failed to initialize NVML: Driver/library version mismatch" in (facts.reason or "")


def test_garbage_lscpu_falls_back_to_proc_cpuinfo(tmp_path: Path, exe, only_path) -> None:
    exe(tmp_path / "lscpu", "#!/bin/sh\necho '{not json'\n")
    only_path(tmp_path)
    facts = detect_cpu(LiveSource())
    assert facts.source == "/proc/cpuinfo" and facts.threads == os.cpu_count()


def test_garbage_torch_probe(tmp_path: Path) -> None:
    (tmp_path / "fixture.json").write_text(json.dumps({
        "values": {"python": {"version": "3.11.7", "implementation": "CPython", "executable": "/usr/bin/python3"}},
        "commands": {"torch": {"stdout_text": "Illegal instruction (core dumped)\n", "rc": 0}}}))
    facts = detect_torch(FixtureSource(tmp_path))
    assert not facts.installed and "cannot parse torch probe output" in (facts.reason or "")


def test_recorded_timeout_in_a_fixture(tmp_path: Path) -> None:
    (tmp_path / "fixture.json").write_text(json.dumps({
        "env": {"PATH": "/usr/bin"}, "files": {"/usr/bin/nvidia-smi": {"text": ""}},
        "commands": {"nvidia-smi-query-gpu": {"timeout": True}}}))
    facts = detect_nvidia(FixtureSource(tmp_path), timeout_s=15)
    assert facts.devices == [] and "timed out after 15 s" in (facts.reason or "")


def test_bad_accelerator_override(monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_detect.gpus import detect_accelerator

    monkeypatch.setenv("CMX_OVERRIDE_ACCELERATOR", "8xh1000")
    with pytest.raises(CmxError, match=r"CMX_OVERRIDE_ACCELERATOR=8xh1000: unknown accelerator tag '8xh1000'"):
        detect_accelerator(FixtureSource(resolve_fixture("l4-1x")))


def test_nvml_probe_that_does_not_answer_in_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, only_path) -> None:
    from cmx_detect import source

    monkeypatch.setattr(source, "NVML_TIMEOUT_S", 0.001)
    _loader_finds_nvml(tmp_path, monkeypatch)
    only_path(tmp_path)  # no nvidia-smi either
    facts = detect_nvidia(LiveSource())
    assert facts.devices == [] and "NVML probe failed" in (facts.reason or "") and "timed out" in (facts.reason or "")


def test_nvml_probe_printing_garbage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, only_path) -> None:
    from cmx_detect import source

    monkeypatch.setattr(source, "NVML_CHILD", "print('CMX-NVML {not json')")
    _loader_finds_nvml(tmp_path, monkeypatch)
    only_path(tmp_path)
    facts = detect_nvidia(LiveSource())
    assert facts.devices == [] and "NVML probe output unreadable" in (facts.reason or "")


def _loader_finds_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on LD_LIBRARY_PATH holding a (non-loadable) libnvidia-ml.so.1."""
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    (lib / "libnvidia-ml.so.1").write_bytes(b"not an ELF file")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    return lib


def test_no_child_interpreter_when_the_loader_cannot_find_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               only_path) -> None:
    from cmx_detect import source

    if source.nvml_library() is not None:
        pytest.fail(f"this test needs a machine without libnvidia-ml.so.1; found {source.nvml_library()}")
    marker = tmp_path / "child-ran"
    monkeypatch.setattr(source, "NVML_CHILD", f"open({str(marker)!r}, 'w').write('x')")
    only_path(tmp_path)
    facts = detect_nvidia(LiveSource())
    assert not marker.exists()
    assert facts.devices == [] and "libnvidia-ml.so.1 is in neither the loader cache" in (facts.reason or "")
    _loader_finds_nvml(tmp_path, monkeypatch)
    assert source.nvml_library() == str(tmp_path / "lib" / "libnvidia-ml.so.1")
    facts = detect_nvidia(LiveSource())
    assert marker.exists() and "NVML probe failed" in (facts.reason or "")


def test_ld_cache_naming_nvml_counts_as_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_detect import source

    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(b"glibc-ld.so.cache1.1\0libnvidia-ml.so.1\0/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\0")
    assert source.nvml_library(str(cache)) == str(cache)
