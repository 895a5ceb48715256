"""cmx: a recipe engine for reproducible ML benchmarking.

The typed Python API lives in :mod:`cmx_core.api` (``cmx_core.run``, ``cmx_core.plan`` ...
are re-exported lazily so that ``import cmx_core`` stays cheap).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_LAZY = {"run", "plan", "explain", "list_recipes", "detect_facts"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from cmx_core import engine

        return getattr(engine, name)
    raise AttributeError(name)
