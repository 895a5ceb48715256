"""Run ids and run directory names (import-light: the warm-run replay uses them too)."""

from __future__ import annotations

import os
import time


def new_run_id() -> str:
    """A random (version 4) UUID string, without importing :mod:`uuid` (and platform)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def run_dir_name(recipe: str, run_id: str) -> str:
    """``<UTC time>-<recipe>-<run id prefix>``: sorts by time, says what ran."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{recipe}-{run_id[:8]}"


def utc_timestamp(epoch_s: float) -> str:
    """ISO-8601 in UTC with millisecond precision and a ``Z`` suffix."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s)) + f".{int(epoch_s * 1000) % 1000:03d}Z"
