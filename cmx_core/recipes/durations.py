"""Durations as recipes write them (``90``, ``30s``, ``10m``, ``12h``, ``1d``): one parser for
step timeouts (:mod:`cmx_core.recipes.model`) and ``resources.time`` (:mod:`cmx_core.recipes.resources`)."""

from __future__ import annotations

import re
from typing import Any

DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> float | None:
    """Seconds for ``90``, ``30s``, ``10m``, ``12h``, ``1d``; None if not a duration."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = DURATION_RE.match(str(value).strip())
    return float(match.group(1)) * _UNITS[match.group(2)] if match else None
