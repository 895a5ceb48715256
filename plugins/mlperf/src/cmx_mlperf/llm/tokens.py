"""Token ids as response bytes: little-endian int32, as MLPerf's LLM reference SUTs send."""

from __future__ import annotations

import struct
from collections.abc import Sequence


def ids_to_bytes(ids: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(ids)}i", *ids)


def ids_from_bytes(data: bytes) -> list[int]:
    if len(data) % 4:
        raise ValueError(f"token data of {len(data)} bytes is not a multiple of 4 (int32 ids)")
    return list(struct.unpack(f"<{len(data) // 4}i", data))
