# mypy: disallow-subclassing-any=False
"""The models and their data: a small CNN on scikit-learn's digits (the CPU default), ResNet-50
on a generated image set and BERT-base on generated token ids (random init or a state_dict).

Imported only inside the ranks (torch is heavy).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cmx_core.api import resnet50
from cmx_train.config import TrainConfig


@dataclass
class Data:
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    name: str


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions, a pool and two linear layers: no batch norm, so the data-parallel
    gradient of N ranks is exactly the mean of theirs and the loss curves can be compared."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                      nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class BertClassifier(nn.Module):
    """BERT-base (transformers, random init from the base config) with a 2-class head."""

    def __init__(self) -> None:
        super().__init__()
        # deferred: transformers only when this runs (253 modules)
        from transformers import BertConfig, BertForSequenceClassification

        self.bert = BertForSequenceClassification(BertConfig(num_labels=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=x).logits


def build(config: TrainConfig) -> tuple[nn.Module, dict[str, Any]]:
    """The model, seeded, and what the result says about it (name, parameters, weights)."""
    torch.manual_seed(config.seed)
    model: nn.Module
    if config.model == "digits-cnn":
        model = DigitsCNN()
    elif config.model == "resnet50":
        model = resnet50()  # cmx-core's one ResNet-50 v1.5, shared with cmx-mlperf's classifier SUT
    else:
        model = BertClassifier()
    info: dict[str, Any] = {"name": config.model, "parameters": sum(p.numel() for p in model.parameters()),
                            "weights": "random", "weights_path": None, "weights_sha256": None}
    if config.weights:
        path = Path(config.weights)
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
        info.update(weights="path", weights_path=str(path),
                    weights_sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    return model, info


def data(config: TrainConfig) -> Data:
    """The training and validation tensors, the same on every rank (seeded)."""
    gen = torch.Generator().manual_seed(config.seed + 1)
    if config.model == "digits-cnn":
        from sklearn.datasets import load_digits  # deferred: sklearn only when this runs (1242 modules)

        digits = load_digits()
        x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        y = torch.tensor(digits.target, dtype=torch.long)
        order = torch.randperm(len(y), generator=gen)
        cut = int(len(y) * 0.8)
        return Data(x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]], "sklearn-digits")
    n = config.samples
    if config.model == "resnet50":
        x = torch.randn(n, 3, config.image_size, config.image_size, generator=gen)
        y = torch.randint(0, 1000, (n,), generator=gen)
        name = f"generated-images-{config.image_size}px"
    else:
        x = torch.randint(0, 30522, (n, config.seq_len), generator=gen)
        y = torch.randint(0, 2, (n,), generator=gen)
        name = f"generated-tokens-{config.seq_len}"
    cut = max(1, n - max(1, n // 8))
    return Data(x[:cut], y[:cut], x[cut:], y[cut:], name)
