"""Toolkit and driver versions normalised to ``major.minor[.patch]``, the raw text kept.

``version.json`` of runfile installs up to CUDA 12.2 holds a build date as the third field
(``11.8.20220929``): a date is not a patch, so that reads ``11.8``. ``nvcc`` gives
``12.4.131``, the same toolkit's ``version.json`` ``12.4.1``: both are kept as they are
(patch levels of 12.4), and ``requires: {cuda.selected.version: "12.4"}`` holds for either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LEAD = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_DATE = re.compile(r"^(19|20)\d{2}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$")


@dataclass(frozen=True)
class Version:
    """A normalised version and the text it came from."""

    version: str | None
    raw: str | None


def normalise(raw: str | None) -> Version:
    """``"11.8.20220929"`` -> ``11.8``; ``"550.54.15"`` stays; ``"6.2.0-66"`` -> ``6.2.0``;
    text without a leading number -> version None (raw kept). Digits stay as written
    (driver ``535.183.01`` keeps its ``01``)."""
    if raw is None:
        return Version(None, None)
    match = _LEAD.match(raw)
    if not match:
        return Version(None, raw)
    major, minor, patch = match.groups()
    parts = [major] + ([minor] if minor is not None else [])
    if patch is not None and minor is not None and not _DATE.match(patch):
        parts.append(patch)
    return Version(".".join(parts), raw)
