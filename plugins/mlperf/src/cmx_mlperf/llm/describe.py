"""What a SUT that talks to a server records about the model, the data and the software.

``model_info`` (the result's ``model`` section) describes the weights the server serves when
they are a local directory the SUT can read (the ``openai-http`` SUT runs beside the server,
e.g. inside the vLLM container): name, source path, a sha256 over the weight files, the
parameter count and dtype from the safetensors headers. ``serving_packages`` names the
serving engine and its version as the server reports them (``owned_by`` of ``/v1/models``,
``GET /version``) and the vllm/torch versions the SUT's own Python can see, with the CUDA
version torch was built with, read from ``torch/version.py`` without importing torch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.errors import ModelDirError
from cmx_mlperf.llm.model_dir import NAME_KEY, safetensors_stats, weights_digest

DATASET_NAME = "cmx-llm-summaries"
"""The name of the built-in prompt set (``llm/dataset.py``): not an MLPerf dataset."""

#: safetensors / torch dtype names -> the names MLPerf's ``weight_data_types`` uses.
MLPERF_DTYPES = {"F32": "fp32", "float32": "fp32", "F16": "fp16", "float16": "fp16", "BF16": "bf16",
                 "bfloat16": "bf16", "F8_E4M3": "fp8", "F8_E5M2": "fp8", "I8": "int8", "int8": "int8",
                 "U8": "uint8", "I4": "int4"}


def dataset_info() -> dict[str, Any]:
    return {"name": DATASET_NAME, "samples": len(SAMPLES), "source": "cmx_mlperf.llm.dataset"}


def local_model_info(model_dir: str | Path, served_name: str = "") -> dict[str, Any]:
    """The ``model`` section for a local model directory (any architecture: the server runs
    it); raises ``ModelDirError`` when it is missing. Reads config.json and the safetensors
    headers and hashes the weight files (seconds per GB: call it once, before timing)."""
    root = Path(model_dir).expanduser()
    if not root.is_dir():
        raise ModelDirError(f"model directory {root} does not exist: set model_dir to the served model's directory")
    config = _read_config(root)
    digest = weights_digest(root)
    stats = safetensors_stats(root)
    dtypes = stats.dtypes if stats else tuple(filter(None, [_config_dtype(config)]))
    archs = config.get("architectures")
    out: dict[str, Any] = {
        "name": str(config.get(NAME_KEY) or served_name or root.name),
        "architecture": str(archs[0]) if isinstance(archs, list) and archs else config.get("model_type"),
        "source": str(root),
        "sha256": digest.sha256 if digest else None,
        "weight_files": digest.files if digest else {},
        "number_of_parameters": stats.parameters if stats else None,
        "weight_data_types": ",".join(dict.fromkeys(MLPERF_DTYPES.get(d, d.lower()) for d in dtypes)) or None,
    }
    if served_name:
        out["served_name"] = served_name
    return out


def served_model_info(served_name: str, reason: str) -> dict[str, Any]:
    """The ``model`` section when the weights are not readable here: only the served name,
    with the reason the rest is missing (null, never guessed)."""
    return {"name": served_name, "source": None, "sha256": None, "number_of_parameters": None,
            "weight_data_types": None, "served_name": served_name, "unknown_reason": reason}


def _read_config(root: Path) -> dict[str, Any]:
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return config if isinstance(config, dict) else {}


def _config_dtype(config: dict[str, Any]) -> str | None:
    value = config.get("torch_dtype") or config.get("dtype")
    return str(value) if value else None


@dataclass(frozen=True)
class Engine:
    """The serving engine as the server reports it; ``name`` from ``owned_by``."""

    name: str | None
    version: str | None


def serving_packages(engine: Engine) -> dict[str, str]:
    """``software.packages`` entries: the server's engine and version, then vllm and torch as
    installed beside the SUT (the server's report wins for the same name), and ``torch-cuda``."""
    out: dict[str, str] = {}
    if engine.name and engine.version:
        out[engine.name] = engine.version
    for name in ("vllm", "torch"):
        try:
            out.setdefault(name, metadata.version(name))
        except metadata.PackageNotFoundError:
            pass
    cuda = torch_cuda_version()
    if cuda:
        out["torch-cuda"] = cuda
    return out


def torch_cuda_version() -> str | None:
    """``torch.version.cuda`` of the installed torch, read from its ``version.py`` (importing
    torch costs seconds and memory); None for a CPU build or no torch."""
    try:
        files = metadata.files("torch") or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).replace("\\", "/") == "torch/version.py":
            return cuda_from_version_py(Path(str(file.locate())))
    return None


def cuda_from_version_py(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None
