"""Detector functions bound to the live machine.

Kept apart from :mod:`cmx_detect.plugin` (which imports cmx-core's plugin API) so that
cmx-core's warm-run replay can check a fact's fingerprint by reference —
``partial(bound, fp_os)`` — without loading the plugin system.
"""

from __future__ import annotations

from cmx_detect.source import LiveSource

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from cmx_detect.source import Source

_SOURCE: list[Source] = []


def bound(fn: Callable[[Source], Any]) -> Any:
    """``fn(live source)``; the live source is created on first use."""
    if not _SOURCE:
        _SOURCE.append(LiveSource())
    return fn(_SOURCE[0])
