"""Content, not stat, is a model's identity where it is verified: an in-place edit of model
weights that keeps the size and puts the mtime back (``os.utime``) fails the lock replay of a
run that used the model, and the digest cache hashes such a file again (its key holds the
inode change time, which any write moves and no user call sets back)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from cmx_detect import models

RECIPE = """name: use-detected-model
version: "1.0"
tags: [use, detected, model]
summary: a benchmark's model dependency satisfied by a detected model
deps:
  - tags: [get, model, detected]
    as: model
    with: {path: "{{ detected_model(facts.models, 'llama-tiny').path }}",
           digest: "{{ detected_model(facts.models, 'llama-tiny').digest }}"}
"""


def _tiny_model(directory: Path) -> Path:
    """A model directory: a config and one small safetensors shard (its weights file)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}}).encode()
    shard = directory / "model.safetensors"
    shard.write_bytes(struct.pack("<Q", len(header)) + header + bytes(range(16)))
    return shard


def _edit_in_place_keeping_size_and_mtime(file: Path) -> None:
    before = os.stat(file)
    with open(file, "r+b") as handle:
        handle.seek(before.st_size - 4)
        handle.write(b"\xff\xff\xff\xff")
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(file)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def _cmx(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, check=False)


def test_an_in_place_edit_of_model_weights_with_mtime_restored_fails_the_lock_replay(tmp_path: Path,
                                                                                      cmx_home: Any) -> None:
    shard = _tiny_model(tmp_path / "models" / "tiny")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "use.yaml").write_text(RECIPE)
    env = {"CMX_MODEL_PATHS": str(tmp_path / "models"), "CMX_MLC_MODELS": str(tmp_path / "no-mlc"),
           "HF_HOME": str(tmp_path / "hf"), "CMX_NO_REPLAY": "1"}
    first = _cmx(["run", "--recipes", str(tmp_path / "recipes"), "--tags=use,detected,model"], env)
    assert first.returncode == 0, first.stderr
    lock = Path(first.stdout.strip().splitlines()[-1].removeprefix("result: ")).parent / "lock.json"
    same = _cmx(["run", "--lock", str(lock)], env)
    assert same.returncode == 0, same.stderr  # unchanged: the replay runs
    _edit_in_place_keeping_size_and_mtime(shard)
    edited = _cmx(["run", "--lock", str(lock)], env)  # within the models fact's 60 s lifetime
    assert edited.returncode == 2 and "Traceback" not in edited.stderr, edited.stderr
    lines = edited.stderr.strip().splitlines()
    assert f"model file {shard} changed in place with its size and mtime kept" in lines[0], lines
    assert "the run would differ from the lock" in lines[-1] and "input digest" in lines[-1], lines


def test_the_digest_cache_hashes_an_edit_that_kept_size_and_mtime(tmp_path: Path) -> None:
    shard = _tiny_model(tmp_path / "tiny")
    cache_file = tmp_path / "digests.json"
    cold = models.DigestCache(cache_file)
    first = models.weights_digest(shard.parent, cold)
    cold.save()
    warm = models.DigestCache(cache_file)
    assert models.weights_digest(shard.parent, warm) == first and warm.hashed == 0
    stamp = models.tree_stamp({"CMX_MODEL_PATHS": str(shard.parent), "CMX_MLC_MODELS": str(tmp_path / "none"),
                               "HF_HOME": str(tmp_path / "hf")})
    _edit_in_place_keeping_size_and_mtime(shard)
    again = models.DigestCache(cache_file)
    assert models.weights_digest(shard.parent, again) != first and again.hashed == 1
    assert models.tree_stamp({"CMX_MODEL_PATHS": str(shard.parent), "CMX_MLC_MODELS": str(tmp_path / "none"),
                              "HF_HOME": str(tmp_path / "hf")}) != stamp


def test_docs_models_md_says_the_digest_cache_keys_on_the_ctime() -> None:
    doc = " ".join((Path(__file__).resolve().parents[3] / "docs" / "models.md").read_text().split())
    assert "checked against its inode, size, mtime and ctime" in doc
    assert "changed in place with its size and mtime kept" in doc and "test_model_identity.py" in doc
    assert "any model file's inode, size, mtime or ctime" in doc
