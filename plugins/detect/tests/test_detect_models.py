"""The ``models`` detector (cmx_detect.models) on real Hugging Face layouts made here: a tiny
random Llama saved with transformers (sharded safetensors, a fast tokenizer), laid out as a
hub cache (blobs named by sha256, snapshot symlinks into them) and as a plain directory."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_detect import models

pytest.importorskip("transformers")
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _save_tiny_llama(dest: Path) -> int:
    """A tiny random Llama 3.1-shaped model (rope type llama3, 131072 positions) in ``dest``,
    in at least two safetensors shards, with a WordLevel fast tokenizer; its parameter count."""
    import torch
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=131072,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                         torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(dest, max_shard_size="20KB", safe_serialization=True)
    vocab = {f"w{i}": i for i in range(60)} | {"<unk>": 60, "<s>": 61, "</s>": 62}
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<unk>")),
                                   unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(dest)
    return sum(p.numel() for p in model.parameters())


def _as_hub_cache(saved: Path, hub: Path, repo: str) -> Path:
    """``saved`` moved into the hub cache layout: blobs/<sha256>, snapshots/REV/<file> -> blob."""
    root = hub / ("models--" + repo.replace("/", "--"))
    (root / "blobs").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(REVISION)
    snapshot = root / "snapshots" / REVISION
    for file in sorted(p for p in saved.rglob("*") if p.is_file()):
        sha = hashlib.sha256(file.read_bytes()).hexdigest()
        blob = root / "blobs" / sha
        if not blob.exists():
            file.replace(blob)
        link = snapshot / file.relative_to(saved)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    saved = tmp_path_factory.mktemp("saved")
    return saved, _save_tiny_llama(saved)


@pytest.fixture
def hub(tmp_path: Path, tiny: tuple[Path, int]) -> tuple[Path, Path, int]:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny[0], copy)
    hf_home = tmp_path / "hf"
    snapshot = _as_hub_cache(copy, hf_home / "hub", "acme/tiny-llama")
    return hf_home, snapshot, tiny[1]


def _env(hf_home: Path, **more: str) -> dict[str, str]:
    return {"HF_HOME": str(hf_home), "CMX_MLC_MODELS": str(hf_home / "no-mlc"), **more}


def test_a_hub_cache_snapshot_is_found_and_described(hub: tuple[Path, Path, int], tmp_path: Path) -> None:
    hf_home, snapshot, parameters = hub
    assert all((snapshot / name).is_symlink() for name in ("config.json", "tokenizer.json"))
    (found,) = models.detect(_env(hf_home), tmp_path / "digests.json")
    assert (found["source"], found["name"], found["revision"]) == ("hf-cache", "acme/tiny-llama", REVISION)
    assert found["path"] == str(snapshot)
    assert found["architecture"] == "LlamaForCausalLM" and found["model_type"] == "llama"
    assert found["parameters"] == parameters and found["dtype"] == "bfloat16"
    shards = sorted(p.name for p in snapshot.glob("*.safetensors"))
    assert found["shards"] == len(shards) >= 2 and (snapshot / "model.safetensors.index.json").exists()
    assert "tokenizer.json" in found["tokenizer"] and "tokenizer_config.json" in found["tokenizer"]
    assert {"llama", "llama-tiny", "llama3.1", "llama3.1-tiny", "llamaforcausallm"} <= set(found["tags"])


def test_the_digest_is_a_manifest_of_file_sha256s(hub: tuple[Path, Path, int]) -> None:
    _hf, snapshot, _n = hub
    files = sorted(p for p in snapshot.rglob("*") if p.is_file())
    lines = "".join(f"{p.relative_to(snapshot).as_posix()}  {hashlib.sha256(p.read_bytes()).hexdigest()}\n"
                    for p in files)
    assert models.manifest_digest(snapshot) == hashlib.sha256(lines.encode()).hexdigest()


def test_a_warm_check_hashes_nothing_and_a_changed_file_is_rehashed(hub: tuple[Path, Path, int],
                                                                     tmp_path: Path) -> None:
    _hf, snapshot, _n = hub
    cache_file = tmp_path / "digests.json"
    cold = models.DigestCache(cache_file)
    first = models.describe(snapshot, cache=cold)
    assert cold.hashed == first.files > 0
    cold.save()
    warm = models.DigestCache(cache_file)
    assert models.describe(snapshot, cache=warm).digest == first.digest and warm.hashed == 0
    blob = (snapshot / "config.json").resolve()
    blob.write_text(blob.read_text().replace('"llama"', '"llama" '))
    again = models.DigestCache(cache_file)
    assert models.describe(snapshot, cache=again).digest != first.digest and again.hashed == 1


def test_user_directories_and_mlcommons_paths(tiny: tuple[Path, int], tmp_path: Path) -> None:
    import shutil

    mine, mlc = tmp_path / "mine", tmp_path / "mlc"
    shutil.copytree(tiny[0], mine / "Llama-tiny")
    shutil.copytree(tiny[0], mlc / "llama3.1-8b-like")
    found = models.detect({"CMX_MODEL_PATHS": str(mine), "CMX_MLC_MODELS": str(mlc),
                           "HF_HOME": str(tmp_path / "none")}, None)
    assert [(m["source"], m["name"]) for m in found] == [("path", "Llama-tiny"), ("mlcommons", "llama3.1-8b-like")]
    assert found[0]["digest"] == found[1]["digest"]  # the same content, wherever it lies
    assert models.select(found, ["llama3.1", "tiny"]) == [] and len(models.select(found, ["llama3.1-tiny"])) == 2
    with pytest.raises(UsageError, match="not a directory"):
        models.detect({"CMX_MODEL_PATHS": str(tmp_path / "missing")}, None)


def test_a_broken_shard_is_one_usage_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(UsageError, match="not a safetensors file"):
        models.describe(tmp_path)


@pytest.mark.parametrize(("parameters", "tag"), [(8_030_261_248, "8b"), (70_553_706_496, "71b"),
                                                 (494_032_768, "0.5b"), (139_584, "tiny"), (None, None)])
def test_size_tags(parameters: int | None, tag: str | None) -> None:
    assert models.size_tag(parameters) == tag


def test_llama31_8b_config_is_tagged_like_the_accelerator_tags() -> None:
    config = {"model_type": "llama", "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3"}}
    assert models.tags(config, 8_030_261_248, "LlamaForCausalLM")[:4] == ["llama", "llama-8b", "llama3.1",
                                                                          "llama3.1-8b"]


def _cmx(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, check=False)


def test_cmx_detect_json_lists_the_models(hub: tuple[Path, Path, int], cmx_home: Any) -> None:
    hf_home, _snapshot, parameters = hub
    out = _cmx(["detect", "--json", "--only", "models"], _env(hf_home))
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    found = listed.get("facts", listed)["models"]
    assert [(m["name"], m["parameters"]) for m in found] == [("acme/tiny-llama", parameters)]


def test_cmx_detect_with_a_bad_model_path_is_one_line_and_exit_2(tmp_path: Path, cmx_home: Any) -> None:
    out = _cmx(["detect", "--json", "--only", "models"], {"CMX_MODEL_PATHS": str(tmp_path / "missing"),
                                                          "HF_HOME": str(tmp_path)})
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "CMX_MODEL_PATHS" in out.stderr


def test_a_1gb_sparse_tree_is_hashed_once_then_only_stated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree benchmarks/bench_model_digest.py times (its 50 ms warm figure is in
    docs/models.md, not asserted here): 1 GB in a sparse shard. The warm pass opens no file."""
    import builtins
    import struct

    root = tmp_path / "big"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [500_000_000], "data_offsets": [0, 10**9]}}).encode()
    shard = root / "model.safetensors"
    with shard.open("wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
        handle.truncate(8 + len(header) + 10**9)  # sparse: the bytes are a hole of zeros
    cache_file = tmp_path / "digests.json"
    cold = models.DigestCache(cache_file)
    first = models.describe(root, cache=cold)
    cold.save()
    size = shard.stat().st_size + (root / "config.json").stat().st_size
    assert (cold.hashed, first.parameters, first.bytes) == (2, 500_000_000, size)
    real_open = builtins.open
    opened: list[str] = []

    def watching(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    warm = models.DigestCache(cache_file)
    monkeypatch.setattr(builtins, "open", watching)
    digest = models.manifest_digest(root, None, warm)
    monkeypatch.undo()
    assert digest == first.digest and warm.hashed == 0 and opened == []


def test_docs_models_md_lists_every_field_root_and_tokenizer_file() -> None:
    import dataclasses

    doc = (Path(__file__).resolve().parents[3] / "docs" / "models.md").read_text()
    for field in dataclasses.fields(models.Model):
        assert f"`{field.name}`" in doc, field.name
    for name in (*models._TOKENIZER_FILES, "HF_HUB_CACHE", "HF_HOME", "CMX_MODEL_PATHS", "CMX_MLC_MODELS",
                 "model-digests.json", "RELPATH  SHA256", "llama3.1-8b", "benchmarks/bench_model_digest.py"):
        assert name in doc, name
    from cmx_detect.detectors import SPECS

    (spec,) = [s for s in SPECS if s.name == "models"]
    assert spec.ttl_s == 60.0 and "cached for 60 s" in doc and not spec.replayed


def test_cmx_run_detect_model_prints_the_models(hub: tuple[Path, Path, int], cmx_home: Any) -> None:
    hf_home, snapshot, _n = hub
    out = _cmx(["run", "recipe", "--tags=detect,model"], _env(hf_home))
    assert out.returncode == 0, out.stderr
    result = Path(out.stdout.strip().splitlines()[-1].removeprefix("result: "))
    (found,) = json.loads(result.read_text())["outputs"]["models"]
    assert found["path"] == str(snapshot) and found["name"] == "acme/tiny-llama"


def test_detected_model_picks_by_tags_and_refuses_a_missing_one() -> None:
    listed = [{"name": "a", "path": "/a", "tags": ["llama", "llama-tiny"]},
              {"name": "b", "path": "/b", "tags": ["llama", "llama3.1-8b"]}]
    assert models.detected_model(listed, "llama3.1-8b")["path"] == "/b"
    assert models.detected_model(listed, "llama, llama-tiny")["path"] == "/a"
    with pytest.raises(UsageError, match="no detected model has the tags gemma"):
        models.detected_model(listed, "gemma")
    with pytest.raises(UsageError, match="give the tags"):
        models.detected_model(listed, "")
