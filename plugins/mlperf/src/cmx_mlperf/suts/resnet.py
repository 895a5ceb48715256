"""ResNet-50: cmx-core's one definition (``cmx_core.api.resnet50``), shared with cmx-train.

Parameter names match torchvision's ``resnet50``, so a torchvision ``state_dict`` file loads
as is (torchvision itself cannot be installed next to this torch build).
"""

from __future__ import annotations

from cmx_core.api import resnet50

__all__ = ["resnet50"]
