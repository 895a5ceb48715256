"""The models: weights from a path are loaded and said in the result (path and sha256), random
initialisation is said too; ResNet-50 and BERT-base (the GPU models) build and take a training
step on the CPU at toy sizes (32 px images, 8 tokens)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest


def test_weights_from_a_path_are_said(train: Any, tmp_path: Path) -> None:
    import torch

    from cmx_train.models import DigitsCNN

    torch.manual_seed(42)
    weights = tmp_path / "cnn.pt"
    torch.save(DigitsCNN().state_dict(), weights)
    loaded = train(weights=str(weights), batch_size=32, steps=2, warmup_steps=0).result
    model = loaded.sections["train"]["model"]
    assert model["weights"] == "path" and model["weights_path"] == str(weights)
    assert model["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert "weights initialised at random (seeded)" not in loaded.sections["train"]["unofficial_reasons"]
    fresh = train(batch_size=32, steps=2, warmup_steps=0).result
    assert fresh.sections["train"]["model"]["weights"] == "random"
    assert fresh.sections["train"]["losses"][0] != loaded.sections["train"]["losses"][0]  # the weights were used


@pytest.mark.parametrize("model", ["resnet50", "bert-base"])
def test_the_gpu_models_take_a_step_on_the_cpu(train: Any, model: str) -> None:
    if model == "bert-base":
        pytest.importorskip("transformers", reason="bert-base needs cmx-train[bert]")
    part = train(model=model, image_size=32, seq_len=8, samples=4, batch_size=2, steps=1, warmup_steps=0,
                 timeout_s=180).result
    section = part.sections["train"]
    assert part.status == "valid" and section["model"]["name"] == model and section["data"] == "generated"
    assert part.benchmark["task"] == model and part.benchmark["division"] == "unofficial"
    assert any("generated data" in reason for reason in section["unofficial_reasons"])
