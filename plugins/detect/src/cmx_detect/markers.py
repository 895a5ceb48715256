"""One filter for the "no value" markers GPU tools print in place of a value.

nvidia-smi writes ``N/A``, ``[N/A]``, ``[Not Supported]``, ``Not Found`` (a K80's
``<cuda_version>``), ``Unknown Error``; rocm-smi 5.7 writes ``"Unique ID": "N/A"`` for MI100s.
Every parser, NVIDIA and AMD, reads its text fields through :class:`FieldReader`, so a marker
becomes ``None`` and the field lands in ``unavailable`` with what the tool said, instead of
becoming a value such as ``cuda_driver_version: "Not Found"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MARKERS = frozenset({"n/a", "na", "not found", "not supported", "unknown error", "unknown", "none",
                     "not available", "unsupported", "insufficient permissions", "gpu is lost"})


def is_marker(raw: Any) -> bool:
    """Whether ``raw`` is empty or a "no value" marker (brackets and case ignored)."""
    if raw is None:
        return True
    text = str(raw).strip()
    return not text or text.strip("[]").strip().lower() in MARKERS


def clean(raw: Any) -> str | None:
    """``raw`` stripped, or None for a marker."""
    return None if is_marker(raw) else str(raw).strip()


@dataclass(frozen=True)
class Unavailable:
    """A field the tool did not give a value for, and what it printed instead."""

    field: str
    reason: str


@dataclass
class FieldReader:
    """Reads one device's (or one report's) fields and remembers which were markers."""

    tool: str
    unavailable: list[Unavailable] = field(default_factory=list)

    def text(self, name: str, raw: Any) -> str | None:
        value = clean(raw)
        if value is None and raw is not None:
            said = str(raw).strip()
            self.unavailable.append(Unavailable(name, f"{self.tool} printed {said!r}" if said else
                                                f"{self.tool} printed an empty value"))
        return value
