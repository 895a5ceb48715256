"""Metric values as people read them: in their own unit, thousands separators, a few digits.

Import-light (the warm-run replay prints a summary). No unit is ever converted: 7.31 ns
is ``7.31`` with the unit ``ns``, never ``0.000 ms``.
"""

from __future__ import annotations

import math


def finite_number(text: str) -> float | None:
    """``text`` as a finite number (``64``, ``5e8``), or None (not a number, ``nan``, ``inf``)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def fmt_number(value: float | int | None) -> str:
    """``1,234`` for integers, ``200,000.0`` (one decimal) from 1,000 up, up to 3 decimals
    from 1 up, 4 significant digits below 1; ``-`` for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.1f}"
    if magnitude >= 1:
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"
