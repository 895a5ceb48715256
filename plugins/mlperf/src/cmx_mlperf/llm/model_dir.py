"""Checking and loading a Llama-architecture causal LM from a local directory."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

from cmx_mlperf.llm.errors import ModelDirError

LLAMA_ARCHITECTURES = frozenset({"LlamaForCausalLM"})
NAME_KEY = "cmx_model_name"
"""A ``config.json`` key naming a model cmx built (e.g. ``cmx-tiny-llama-h64-l2-s0``)."""


@dataclass(frozen=True)
class ModelInfo:
    """What ``config.json`` says about a model directory."""

    path: Path
    architecture: str
    model_type: str
    config: dict[str, Any]


def check_llama_dir(path: str | Path) -> ModelInfo:
    """Return the model's info, or raise :class:`ModelDirError` with a one-line reason.

    Only ``config.json`` is read, so this is cheap enough to run before LoadGen starts.
    """
    if not str(path).strip():
        raise ModelDirError("model directory not set: pass the path of a Llama model directory")
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ModelDirError(f"model directory {root} does not exist: build or download the model first")
    config_file = root / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelDirError(f"model directory {root} has no config.json: not a transformers model") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"model directory {root}: config.json unreadable ({_short(exc)})") from None
    if not isinstance(config, dict):
        raise ModelDirError(f"model directory {root}: config.json is not a JSON object")
    archs = config.get("architectures") or []
    model_type = str(config.get("model_type", ""))
    archs = archs if isinstance(archs, list) else [archs]
    found = str(archs[0]) if archs else model_type or "unknown"
    is_llama = found in LLAMA_ARCHITECTURES if archs else model_type == "llama"
    if not is_llama:
        raise ModelDirError(
            f"model directory {root} holds architecture {found}; only LlamaForCausalLM is supported"
        )
    return ModelInfo(path=root, architecture=str(found), model_type=model_type, config=config)


def load_llama(path: str | Path, device: str = "cpu", dtype: str = "float32") -> tuple[Any, Any]:
    """Load (model, tokenizer) from a checked Llama directory, offline, in eval mode.

    ``dtype=`` is the keyword of transformers >= 4.56 (the ``llm`` extra's floor).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    info = check_llama_dir(path)
    import torch  # deferred: torch only when this runs (1033 modules)
    from transformers import AutoTokenizer, LlamaForCausalLM  # deferred: transformers only when this runs (477 modules)

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ModelDirError(f"dtype {dtype!r} is not a torch dtype: use float32, float16 or bfloat16")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(info.path), local_files_only=True)
        model = LlamaForCausalLM.from_pretrained(str(info.path), dtype=torch_dtype, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers/safetensors/tokenizers raise many types for bad files
        raise ModelDirError(f"model directory {info.path} cannot be loaded: {_short(exc)}") from None
    model.to(device)
    model.eval()
    return model, tokenizer


def _short(exc: BaseException) -> str:
    """The first line of an exception's message, bounded, for one-line errors."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "*.pt", "*.pth")
"""The files that hold a model's weights, in order of preference (the first pattern that
matches any file wins: a directory with safetensors and a .bin copy digests the safetensors)."""


@dataclass(frozen=True)
class WeightsDigest:
    """``sha256``: over the lines ``"<file sha256>  <file name>\\n"`` of the weight files sorted
    by name (what ``sha256sum`` prints for them, hashed once more), so one value names the set;
    ``files``: each file's own sha256, for comparing a single-file checkpoint directly."""

    sha256: str
    files: dict[str, str]


def weight_files(root: Path) -> list[Path]:
    for pattern in WEIGHT_PATTERNS:
        found = sorted(p for p in root.glob(pattern) if p.is_file())
        if found:
            return found
    return []


def weights_digest(root: str | Path) -> WeightsDigest | None:
    """The digest of a model directory's weight files; None when it has none."""
    files = {p.name: _file_sha256(p) for p in weight_files(Path(root))}
    if not files:
        return None
    listing = "".join(f"{digest}  {name}\n" for name, digest in sorted(files.items()))
    return WeightsDigest(hashlib.sha256(listing.encode()).hexdigest(), files)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class TensorStats:
    """Parameter count and dtypes from safetensors headers (no tensor is loaded)."""

    parameters: int
    dtypes: tuple[str, ...]  # safetensors names, e.g. ("BF16",), most common first


def safetensors_stats(root: str | Path) -> TensorStats | None:
    """None when the directory has no safetensors files or the library is missing."""
    files = sorted(Path(root).glob("*.safetensors"))
    if not files:
        return None
    try:
        from safetensors import safe_open  # deferred: optional safetensors, only when this runs
    except ImportError:
        return None

    total = 0
    dtypes: Counter[str] = Counter()
    for path in files:
        with safe_open(str(path), framework="numpy") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                part = handle.get_slice(key)
                n = prod(part.get_shape())
                total += n
                dtypes[str(part.get_dtype())] += n
    return TensorStats(total, tuple(d for d, _ in dtypes.most_common()))
