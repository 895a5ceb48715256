# mypy: disallow-subclassing-any=False
"""ResNet-50 v1.5 in plain torch: the one definition the MLPerf classifier SUT (cmx-mlperf)
and the training suite (cmx-train) share, exported as ``cmx_core.api.resnet50``.

It lives in core (``models/``, the bottom floor) because the two suites may not import each
other, torchvision (whose ``resnet50`` it reproduces) cannot be installed next to this torch
build, and a separate distribution for one model is more machinery than it saves. torch is not a cmx-core
dependency: it is imported only when :func:`resnet50` is called (by a suite that has it).

Parameter names match torchvision's ``resnet50`` (``conv1``, ``bn1``, ``layer1.0.conv1``,
``layer1.0.downsample.0``, ``fc`` ...), so a torchvision ``state_dict`` file loads as is, and
the layers are created in torchvision's order, so one seed gives one set of weights.
"""

from __future__ import annotations

from typing import Any


def _build_classes() -> tuple[Any, Any]:
    import torch  # deferred: torch is no cmx-core dependency; only a suite that has it calls this
    from torch import nn  # deferred: as above

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes: int, planes: int, stride: int = 1,
                     downsample: nn.Module | None = None) -> None:
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
            out = self.bn3(self.conv3(out))
            return self.relu(out + identity)

    class ResNet50(nn.Module):
        def __init__(self, num_classes: int = 1000) -> None:
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            self.layer1 = self._layer(64, 3, 1)
            self.layer2 = self._layer(128, 4, 2)
            self.layer3 = self._layer(256, 6, 2)
            self.layer4 = self._layer(512, 3, 2)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, num_classes)

        def _layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
            downsample = None
            if stride != 1 or self.inplanes != planes * 4:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes * 4),
                )
            layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * 4
            layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return Bottleneck, ResNet50


def resnet50(num_classes: int = 1000) -> Any:
    """A randomly initialised ResNet-50 (``torch.nn.Module``)."""
    _, cls = _build_classes()
    return cls(num_classes)
