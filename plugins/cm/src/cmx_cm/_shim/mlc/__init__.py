"""A stand-in for the ``mlc`` package inside cmx-cm's script runner (never installed)."""

from __future__ import annotations

from . import utils

__all__ = ["utils"]
