"""The no-op SUT: completes every sample at once with empty data, to measure the
harness's own overhead (``benchmarks/bench_mlperf_overhead.py``).

``sut_params``: ``total_sample_count`` (default 1024), ``performance_sample_count``
(default: the total).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmx_core.errors import UsageError

from cmx_mlperf.sut import AccuracyEntry, Completer


class NoopSUT:
    name = "noop"
    uses_tokens = False

    def __init__(self, total_sample_count: int, performance_sample_count: int) -> None:
        self.total_sample_count = total_sample_count
        self.performance_sample_count = performance_sample_count
        self._complete_many: Any = None

    def start(self, completer: Completer) -> None:
        many = getattr(completer, "complete_many", None)
        # Without the harness's batch extension, fall back to one call per id.
        self._completer = completer
        self._complete_many = many

    def load_samples(self, indices: list[int]) -> None:
        return None

    def unload_samples(self, indices: list[int]) -> None:
        return None

    def issue(self, response_ids: list[int], sample_indices: list[int]) -> None:
        if self._complete_many is not None:
            self._completer.complete_many(response_ids)
            return
        for response_id in response_ids:
            self._completer.complete(response_id, b"")

    def flush(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def accuracy(self, entries: list[AccuracyEntry]) -> dict[str, float]:
        return {"samples": float(len(entries))}


def make(params: Mapping[str, Any]) -> NoopSUT:
    try:
        total = int(params.get("total_sample_count", 1024))
        perf = int(params.get("performance_sample_count", total))
    except (TypeError, ValueError):
        raise UsageError("noop SUT: total_sample_count and performance_sample_count must be integers") from None
    if total < 1 or not 1 <= perf <= total:
        raise UsageError("noop SUT: need 1 <= performance_sample_count <= total_sample_count")
    return NoopSUT(total, perf)
