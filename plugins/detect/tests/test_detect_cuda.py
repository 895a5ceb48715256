"""CUDA toolkit search on real (temporary) directory trees: wrapper chains, symlinks,
CUDA_HOME without headers, version sources, overrides."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cmx_core.errors import CmxError
from cmx_detect.cuda import detect_cuda, resolve_nvcc
from cmx_detect.detectors import fp_cuda
from cmx_detect.source import LiveSource

FAKE_NVCC = ('#!/bin/sh\necho "nvcc: NVIDIA (R) Cuda compiler driver"\n'
             'echo "Cuda compilation tools, release {mm}, V{v}"\n')


def toolkit(root: Path, name: str, version: str, exe, version_json: bool = False, header: bool = True) -> Path:
    home = root / name
    mm = ".".join(version.split(".")[:2])
    exe(home / "bin" / "nvcc", FAKE_NVCC.format(mm=mm, v=version))
    if header:
        (home / "include").mkdir(parents=True)
        (home / "include" / "cuda.h").write_text("#define CUDA_VERSION 12040\n")
    (home / "lib64").mkdir()
    if version_json:
        (home / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}))
    return home


def test_two_level_wrapper_chain_is_followed(tmp_path: Path, exe, only_path) -> None:
    home = toolkit(tmp_path / "opt", "cuda-12.4", "12.4.131", exe)
    inner = exe(tmp_path / "wrappers" / "inner" / "nvcc", f'#!/bin/sh\nexec "{home}/bin/nvcc" "$@"\n')
    outer = exe(tmp_path / "bin" / "nvcc", f"#!/bin/bash\n# site wrapper\nexec {inner} \"$@\"\n")
    only_path(outer.parent)
    src = LiveSource()
    real, hops = resolve_nvcc(src, str(outer))
    assert real == str(home / "bin" / "nvcc") and hops == ["wrapper script", "wrapper script"]
    facts = detect_cuda(src)
    assert facts.selected is not None
    assert facts.selected.home == str(home) and facts.selected.version == "12.4.131"
    tk = next(t for t in facts.toolkits if t.home == str(home))
    assert tk.version_source == "nvcc --version"
    assert any(r.path == str(tmp_path) and "include/cuda.h" in r.reason for r in facts.rejected)


def test_symlinked_nvcc_and_version_json(tmp_path: Path, exe, only_path) -> None:
    home = toolkit(tmp_path, "cuda-12.6", "12.6.2", exe, version_json=True)
    link_dir = tmp_path / "usrbin"
    link_dir.mkdir()
    (link_dir / "nvcc").symlink_to(home / "bin" / "nvcc")
    only_path(link_dir)
    facts = detect_cuda(LiveSource())
    assert facts.selected and facts.selected.home == str(home)
    assert facts.selected.version == "12.6.2"
    tk = next(t for t in facts.toolkits if t.home == str(home))
    assert tk.version_source == "version.json" and "symlink" in tk.found_via[0]


def test_cuda_home_without_headers_is_rejected(tmp_path: Path, exe, only_path, monkeypatch) -> None:
    bad = toolkit(tmp_path, "broken", "12.1.0", exe, header=False)
    good = toolkit(tmp_path, "cuda-12.1", "12.1.105", exe)
    monkeypatch.setenv("CUDA_HOME", str(bad))
    only_path(good / "bin")
    facts = detect_cuda(LiveSource())
    assert any(r.path == str(bad) and r.found_via.startswith("CUDA_HOME=") for r in facts.rejected)
    assert facts.selected and facts.selected.home == str(good)


def test_cuda_home_wins_over_path(tmp_path: Path, exe, only_path, monkeypatch) -> None:
    first = toolkit(tmp_path, "cuda-11.8", "11.8.89", exe)
    second = toolkit(tmp_path, "cuda-12.1", "12.1.105", exe)
    monkeypatch.setenv("CUDA_HOME", str(first))
    only_path(second / "bin")
    facts = detect_cuda(LiveSource())
    assert facts.selected and facts.selected.home == str(first) and "CUDA_HOME" in facts.reason
    assert {str(first), str(second)} <= {t.home for t in facts.toolkits}


def test_no_toolkit_anywhere_is_not_an_error(tmp_path: Path, only_path, monkeypatch) -> None:
    from cmx_detect import cuda

    only_path(tmp_path)
    monkeypatch.setattr(cuda, "STANDARD_ROOTS", (str(tmp_path / "none"),))
    facts = detect_cuda(LiveSource())
    assert facts.toolkits == [] and facts.selected is None and "no CUDA toolkit" in facts.reason


def test_override_cuda(tmp_path: Path, exe, only_path, monkeypatch) -> None:
    home = toolkit(tmp_path, "cuda-12.4", "12.4.131", exe)
    only_path(home / "bin")
    monkeypatch.setenv("CMX_OVERRIDE_CUDA", "12.4")
    facts = detect_cuda(LiveSource())
    assert facts.selected and facts.selected.source == "CMX_OVERRIDE_CUDA"
    assert facts.selected.version == "12.4" and facts.selected.home == str(home)
    monkeypatch.setenv("CMX_OVERRIDE_CUDA", "")
    assert detect_cuda(LiveSource()).selected is None
    monkeypatch.setenv("CMX_OVERRIDE_CUDA", "twelve")
    with pytest.raises(CmxError, match="CMX_OVERRIDE_CUDA=twelve: expected a CUDA version"):
        detect_cuda(LiveSource())


def test_fingerprint_changes_with_the_probed_binary(tmp_path: Path, exe, only_path) -> None:
    home = toolkit(tmp_path, "cuda-12.4", "12.4.131", exe)
    only_path(home / "bin")
    src = LiveSource()
    before = fp_cuda(src)
    assert fp_cuda(src) == before
    nvcc = home / "bin" / "nvcc"
    st = nvcc.stat()
    os.utime(nvcc, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert fp_cuda(src) != before


def test_without_nvcc_on_path_the_cuda_link_wins_over_newer(tmp_path: Path, exe, only_path, monkeypatch) -> None:
    from cmx_detect import cuda

    root = tmp_path / "usrlocal"
    old = toolkit(root, "cuda-11.8", "11.8.89", exe, version_json=True)
    toolkit(root, "cuda-12.6", "12.6.2", exe, version_json=True)
    (root / "cuda").symlink_to(old)
    only_path(tmp_path / "empty")
    monkeypatch.setattr(cuda, "STANDARD_ROOTS", (str(root),))
    facts = detect_cuda(LiveSource())
    assert facts.selected and facts.selected.home == str(old) and "the cuda link" in facts.reason
    (root / "cuda").unlink()
    newest = detect_cuda(LiveSource())
    assert newest.selected and newest.selected.version == "12.6.2" and "newest" in newest.reason
