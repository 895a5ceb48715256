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


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet50(nn.Module):
    """ResNet-50 v1.5 with torchvision's parameter names (a torchvision state_dict loads)."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._layer(64, 3)
        self.layer2 = self._layer(128, 4, stride=2)
        self.layer3 = self._layer(256, 6, stride=2)
        self.layer4 = self._layer(512, 3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, classes)

    def _layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        layers: list[nn.Module] = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


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
        model = ResNet50()
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
