"""Inter-token latency (ITL) of streamed completions, the way vLLM's serving benchmark
(``benchmark_serving.py`` / ``vllm bench serve``) reports it.

Per request, every chunk that carries generated tokens after the first one adds one gap:
its arrival time minus the previous such chunk's. A chunk carrying several tokens adds one
(longer) gap, not one per token, as vLLM does; so with multi-token chunks ITL is larger than
TPOT, which LoadGen computes per token. The gaps of all requests are pooled (not averaged
per request first) and summarised with linear-interpolation percentiles (``numpy.percentile``,
as vLLM). Failed requests add nothing.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

SUMMARY_KEYS = ("min", "mean", "max", "p50", "p90", "p95", "p97", "p99", "p99_9")
"""The keys of ``mlperf.itl_ns``: the shape of ``mlperf.ttft_ns``."""
_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p97": 97.0, "p99": 99.0, "p99_9": 99.9}
METRICS = ("mean", "p50", "p90", "p99")
"""Summary entries that also become metrics ``itl_<name>_ns`` (unit ns, lower is better)."""


def gaps_ns(arrivals_ns: Sequence[int]) -> list[int]:
    """The gaps between consecutive token-carrying chunks of one request."""
    return [b - a for a, b in itertools.pairwise(arrivals_ns)]


def summarize(gaps: Sequence[int]) -> dict[str, float | None]:
    """min/mean/max and percentiles in ns; every value None when there is no gap."""
    if not gaps:
        return dict.fromkeys(SUMMARY_KEYS)
    import numpy as np  # deferred: numpy only when this runs (111 modules)

    values = np.asarray(gaps, dtype=np.float64)
    out: dict[str, float | None] = {"min": float(values.min()), "mean": float(values.mean()),
                                    "max": float(values.max())}
    out.update({name: float(np.percentile(values, q)) for name, q in _PERCENTILES.items()})
    return out


class ItlPool:
    """Gaps pooled over all completed requests; thread-safe (the SUT's workers add to it)."""

    def __init__(self) -> None:
        self._gaps: list[int] = []
        self._requests = 0
        self._lock = threading.Lock()

    def add(self, arrivals_ns: Sequence[int]) -> None:
        gaps = gaps_ns(arrivals_ns)
        with self._lock:
            self._gaps.extend(gaps)
            self._requests += 1

    @property
    def gap_count(self) -> int:
        with self._lock:
            return len(self._gaps)

    def extra(self) -> dict[str, Any]:
        """The ``extra_results()`` part: metrics ``itl_*_ns`` and ``mlperf.itl_ns``."""
        with self._lock:
            summary = summarize(self._gaps)
            requests, count = self._requests, len(self._gaps)
        metrics = {f"itl_{name}_ns": {"value": summary[name], "unit": "ns", "higher_is_better": False}
                   for name in METRICS}
        return {"metrics": metrics,
                "mlperf": {"itl_ns": summary, "itl_gaps": count, "itl_requests": requests}}
