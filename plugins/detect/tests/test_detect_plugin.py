"""cmx-detect through cmx-core: registration, the fact cache and its invalidation, the
`cmx detect` command, recipes, and `requires: {accelerator: ...}` against facts files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_detect.detectors import NAMES

ROOT = Path(__file__).resolve().parents[3]
H100_FACTS = ROOT / "examples" / "facts" / "h100-sxm-8x.json"
CMX = Path(sys.executable).parent / "cmx"
RECIPE = """\
name: detecttest-bench
tags: [detecttest, bench]
summary: a benchmark that needs an H100
variations:
  cpu: {group: device, default: true}
  h100: {group: device, requires: {accelerator: h100}}
  h10: {group: device, requires: {accelerator: h10}}
steps:
  - uses: cmx.facts
    with: {names: [accelerator]}
outputs:
  accelerator: {}
cache: false
"""


def cmx(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run([str(CMX), *args], capture_output=True, text=True, timeout=timeout, env=full_env, check=False)


@pytest.fixture
def registry(cmx_home):
    from cmx_core.testing.registry import load_registry

    return load_registry()


def test_every_detector_is_registered_and_replaces_the_core_ones(registry) -> None:
    for name in NAMES:
        det = registry.detectors[name]
        assert det.plugin == "detect", name
        assert det.fingerprint is not None and det.ttl_s and det.ttl_s > 0
    assert "detect" in {p for p, _ in registry.recipe_paths}


def test_fact_cache_hits_then_invalidates_when_the_toolkit_changes(
        registry, tmp_path, exe, only_path, cmx_home) -> None:
    from cmx_core.api import FactStore

    home = tmp_path / "cuda-12.4"
    exe(home / "bin" / "nvcc", '#!/bin/sh\necho "Cuda compilation tools, release 12.4, V12.4.131"\n')
    (home / "include").mkdir()
    (home / "include" / "cuda.h").write_text("#define CUDA_VERSION 12040\n")
    only_path(home / "bin")
    first = FactStore(registry.detectors).get("cuda")
    assert first["selected"]["home"] == str(home)
    cache_file = cmx_home / "cache" / "facts" / "cuda.json"
    created = json.loads(cache_file.read_text())["created"]
    assert FactStore(registry.detectors).get("cuda") == first
    assert json.loads(cache_file.read_text())["created"] == created  # served from the cache
    newer = tmp_path / "cuda-12.6"
    exe(newer / "bin" / "nvcc", '#!/bin/sh\necho "Cuda compilation tools, release 12.6, V12.6.20"\n')
    (newer / "include").mkdir()
    (newer / "include" / "cuda.h").write_text("#define CUDA_VERSION 12060\n")
    only_path(newer / "bin", home / "bin")
    again = FactStore(registry.detectors).get("cuda")
    assert again["selected"]["home"] == str(newer) and again["selected"]["version"] == "12.6.20"


def test_accelerator_override_is_part_of_the_fingerprint(registry, monkeypatch) -> None:
    from cmx_core.api import FactStore

    monkeypatch.setenv("CMX_OVERRIDE_ACCELERATOR", "8xh100")
    assert FactStore(registry.detectors).get("accelerator") == ["h100", "8xh100"]
    monkeypatch.setenv("CMX_OVERRIDE_ACCELERATOR", "")
    assert FactStore(registry.detectors).get("accelerator") == []


def test_cmx_detect_json_is_one_document(cmx_home) -> None:
    proc = cmx("detect", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"facts", "errors", "source"} and doc["errors"] == {}
    assert set(NAMES) <= set(doc["facts"])
    assert doc["facts"]["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    if not Path("/proc/driver/nvidia/version").exists():
        assert doc["facts"]["gpus"]["devices"] == [] and doc["facts"]["gpus"]["reason"]
        assert doc["facts"]["accelerator"] == []


def test_cmx_detect_replay_only(cmx_home) -> None:
    proc = cmx("detect", "--json", "--replay", "h100-sxm-8x", "--only", "gpus,accelerator")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc["facts"]) == {"gpus", "accelerator"} and doc["source"] == "replay:h100-sxm-8x"
    assert len(doc["facts"]["gpus"]["devices"]) == 8 and doc["facts"]["accelerator"][0] == "h100"
    text = cmx("detect", "--replay", "mi300x-8x", "--only", "gpus")
    assert text.returncode == 0 and "8x AMD Instinct MI300X via amd-smi" in text.stdout


@pytest.mark.parametrize(("args", "env", "message"), [
    (("--only", "gpu"), {}, "--only gpu: unknown detector 'gpu'; known: os, cpu"),
    (("--replay", "/nonexistent/fixture"), {}, "--replay /nonexistent/fixture: no such fixture"),
    ((), {"CMX_OVERRIDE_ACCELERATOR": "4xh1000"}, "CMX_OVERRIDE_ACCELERATOR=4xh1000: unknown accelerator tag"),
    ((), {"CMX_OVERRIDE_CUDA": "latest"}, "CMX_OVERRIDE_CUDA=latest: expected a CUDA version"),
])
def test_cmx_detect_bad_usage_is_exit_2_one_line(cmx_home, args, env, message) -> None:
    proc = cmx("detect", "--json", *args, env=env)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"].startswith(message.split(":")[0])  # --json: the error as JSON
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    d = tmp_path / "recipes"
    d.mkdir()
    (d / "bench.yaml").write_text(RECIPE)
    return d


def test_requires_h100_fails_here_and_resolves_against_an_h100_facts_file(cmx_home, recipes) -> None:
    none = {"CMX_OVERRIDE_ACCELERATOR": ""}  # this machine, whatever it is, has no accelerator
    here = cmx("plan", "--recipes", str(recipes), "--tags=detecttest,h100", env=none)
    assert here.returncode == 2
    assert "requires accelerator h100; this machine has: none" in here.stderr
    there = cmx("plan", "--json", "--recipes", str(recipes), "--tags=detecttest,h100", "--facts", str(H100_FACTS),
                env=none)
    assert there.returncode == 0, there.stderr
    assert "h100" in there.stdout
    override = cmx("plan", "--recipes", str(recipes), "--tags=detecttest,h100",
                   env={"CMX_OVERRIDE_ACCELERATOR": "8xh100"})
    assert override.returncode == 0, override.stderr


def test_unknown_accelerator_tag_in_a_recipe_is_a_clear_error(cmx_home, recipes) -> None:
    proc = cmx("plan", "--recipes", str(recipes), "--tags=detecttest,h10", "--facts", str(H100_FACTS))
    assert proc.returncode == 2
    assert "requires.accelerator: unknown accelerator tag 'h10'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_malformed_facts_file_on_plan(cmx_home, recipes, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"facts": [')
    proc = cmx("plan", "--recipes", str(recipes), "--tags=detecttest", "--facts", str(bad))
    assert proc.returncode == 2 and "bad.json" in proc.stderr and "Traceback" not in proc.stderr


def test_detect_system_recipe_runs_end_to_end(cmx_home) -> None:
    proc = cmx("run", "recipe", "--tags=detect,system", "--json")
    assert proc.returncode == 0, proc.stderr
    outputs = json.loads(proc.stdout)["outputs"]
    assert set(outputs) == {"os", "python", "cpu", "memory", "cuda", "gpus", "accelerator", "torch",
                            "container_engines"}
    assert outputs["cpu"]["threads"] and outputs["memory"]["total_bytes"]
    if Path("/usr/local/bin/nvcc").is_file():
        assert outputs["cuda"]["selected"]["home"] != "/usr/local"


def test_detect_os_shadows_the_core_recipe(cmx_home) -> None:
    proc = cmx("explain", "--tags=detect,os")
    assert proc.returncode == 0, proc.stderr
    assert "detect-os [core]: shadowed by plugin:detect" in proc.stdout
