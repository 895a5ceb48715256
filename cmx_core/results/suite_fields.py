"""Read a suite's own field from a result, wherever its schema version put it.

Suite-specific fields live in the suite's section (``mlperf.mlperf_name``). Results written
before that carry some of them in the shared ``benchmark`` object (``benchmark.mlperf_name``,
``benchmark.availability``, as ``null`` for every suite); they are still read from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MLPERF_SECTION = "mlperf"


def section_field(doc: Mapping[str, Any], section: str, key: str) -> Any:
    """``doc[section][key]``, else the older ``doc["benchmark"][key]``, else None."""
    own = doc.get(section)
    if isinstance(own, Mapping) and own.get(key) is not None:
        return own[key]
    benchmark = doc.get("benchmark")
    return benchmark.get(key) if isinstance(benchmark, Mapping) else None


def mlperf_field(doc: Mapping[str, Any], key: str) -> Any:
    """An MLPerf field (``mlperf_name``, ``availability``) of ``doc``."""
    return section_field(doc, MLPERF_SECTION, key)
