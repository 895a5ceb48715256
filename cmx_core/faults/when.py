"""The ``@WHEN`` of an injection: a size limit (``64K``, ``32M``, ``1G``)."""

from __future__ import annotations

import re

from cmx_core.errors import UsageError

_SIZE = re.compile(r"^(\d+)([KMG]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str, when: str, default: int) -> int:
    """``when`` as bytes (``default`` when empty); a one-line UsageError naming ``text`` if bad."""
    if not when:
        return default
    match = _SIZE.match(when)
    if match is None or int(match.group(1)) <= 0:
        raise UsageError(f"--inject {text!r}: the limit is a size like 64K, 32M or 1G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]
