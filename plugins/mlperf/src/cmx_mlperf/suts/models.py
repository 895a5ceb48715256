"""Model loading for the classifier SUT.

* ``digits-mlp``: a 64-128-10 MLP trained on the digits training split at first use with a
  fixed seed, its weights cached (atomically) under the cmx cache directory.
* ``resnet50``: user-provided weights: a TorchScript file (``torch.jit.save``) or a
  ``state_dict`` (torchvision naming, optionally under a ``state_dict``/``model`` key).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_mlperf.suts.datasets import digits_split
from cmx_mlperf.suts.resnet import resnet50

DIGITS_SEED = 0
DIGITS_EPOCHS = 100
DIGITS_FILE = f"digits-mlp-v1-seed{DIGITS_SEED}.pt"


@dataclass
class LoadedModel:
    module: Any  # torch.nn.Module or torch.jit.ScriptModule, in eval mode
    info: dict[str, Any]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _mlp() -> Any:
    from torch import nn  # deferred: torch only when this runs (1020 modules)

    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _train_digits(path: Path) -> None:
    import torch  # deferred: torch only when this runs (1020 modules)


    split = digits_split()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is fastest and bit-reproducible
    try:
        _fit(path, split)
    finally:
        torch.set_num_threads(threads)


def _fit(path: Path, split: Any) -> None:
    import torch  # deferred: torch only when this runs (1020 modules)

    torch.manual_seed(DIGITS_SEED)
    model = _mlp()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.from_numpy(split.x_train), torch.from_numpy(split.y_train)
    for _ in range(DIGITS_EPOCHS):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimiser.step()
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(model.state_dict(), staging)
    os.replace(staging, path)  # atomic: concurrent first uses never see half a file


def load_digits_mlp(cache_dir: Path) -> LoadedModel:
    import torch  # deferred: torch only when this runs (1020 modules)

    path = cache_dir / DIGITS_FILE
    if not path.is_file():
        _train_digits(path)
    model = _mlp()
    model.load_state_dict(torch.load(path, weights_only=True))
    model.eval()
    info = {"name": "digits-mlp", "architecture": "mlp-64-128-10", "weight_data_types": "fp32",
            "number_of_parameters": sum(p.numel() for p in model.parameters()),
            "source": f"trained locally on sklearn digits (seed {DIGITS_SEED})",
            "sha256": _sha256(path)}
    return LoadedModel(model, info)


def load_resnet50(model_path: Path) -> LoadedModel:
    """Load ResNet-50 weights; any problem is one :class:`UsageError` line naming the file."""
    import torch  # deferred: torch only when this runs (1020 modules)

    if not model_path.is_file():
        raise UsageError(f"model_path {model_path}: no such file; pass ResNet-50 weights (TorchScript or state_dict)")
    if _is_torchscript(model_path):
        try:
            module = torch.jit.load(str(model_path), map_location="cpu")
        except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad archive
            raise UsageError(f"model_path {model_path}: not a loadable TorchScript file ({_first_line(exc)})") from None
        arch = "torchscript"
    else:
        module = _resnet_from_state_dict(model_path)
        arch = "resnet50"
    module.eval()
    info = {"name": "resnet50", "architecture": arch, "weight_data_types": "fp32",
            "number_of_parameters": sum(p.numel() for p in module.parameters()),
            "source": str(model_path), "sha256": _sha256(model_path)}
    return LoadedModel(module, info)


def _is_torchscript(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("constants.pkl") or "/code/" in name for name in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _resnet_from_state_dict(path: Path) -> Any:
    import torch  # deferred: torch only when this runs (1020 modules)


    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - pickle/zip/format errors all mean "bad file"
        raise UsageError(f"model_path {path}: not a readable torch weights file ({_first_line(exc)})") from None
    if isinstance(state, dict):
        for key in ("state_dict", "model"):
            if isinstance(state.get(key), dict):
                state = state[key]
    if not isinstance(state, dict) or "fc.weight" not in state:
        raise UsageError(f"model_path {path}: not ResNet-50 weights (no 'fc.weight' tensor); "
                         "pass a torchvision-style resnet50 state_dict")
    model = resnet50(num_classes=int(state["fc.weight"].shape[0]))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise UsageError(f"model_path {path}: not ResNet-50 weights ({_first_line(exc)})") from None
    return model


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] + ("..." if len(text) > 200 else "")
