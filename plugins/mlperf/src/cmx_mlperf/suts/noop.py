"""The no-op SUT: completes every sample at once with empty data, to measure the
harness's own overhead (``benchmarks/bench_mlperf_overhead.py``).

``sut_params``: ``total_sample_count`` (default 1024), ``performance_sample_count``
(default: the total), ``tokens_per_sample`` (default 0; above 0 the SUT reports a first
token and then ``n_tokens`` per sample, exercising LoadGen's TTFT/TPOT path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmx_core.errors import UsageError
from cmx_mlperf.sut import AccuracyEntry, Completer

_TOKEN = (1).to_bytes(4, "little")


class NoopSUT:
    name = "noop"

    def __init__(self, total_sample_count: int, performance_sample_count: int,
                 tokens_per_sample: int = 0) -> None:
        self.total_sample_count = total_sample_count
        self.performance_sample_count = performance_sample_count
        self.tokens_per_sample = tokens_per_sample
        self.uses_tokens = tokens_per_sample > 0

    def start(self, completer: Completer) -> None:
        """Bind ``issue`` to the cheapest path the completer offers (the harness's
        ``complete_many`` batch extension, else one ``complete`` per id)."""
        self._completer = completer
        many = getattr(completer, "complete_many", None)
        if self.uses_tokens:
            self.issue = self._issue_tokens  # type: ignore[method-assign]
        elif many is not None:

            def issue(response_ids: list[int], sample_indices: list[int], _many: Any = many) -> None:
                _many(response_ids)

            self.issue = issue  # type: ignore[method-assign]

    def load_samples(self, indices: list[int]) -> None:
        return None

    def unload_samples(self, indices: list[int]) -> None:
        return None

    def issue(self, response_ids: list[int], sample_indices: list[int]) -> None:
        for response_id in response_ids:
            self._completer.complete(response_id, b"")

    def _issue_tokens(self, response_ids: list[int], sample_indices: list[int]) -> None:
        data = _TOKEN * self.tokens_per_sample
        for response_id in response_ids:
            self._completer.first_token(response_id, _TOKEN)
            self._completer.complete(response_id, data, self.tokens_per_sample)

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
        tokens = int(params.get("tokens_per_sample", 0))
    except (TypeError, ValueError):
        raise UsageError(
            "noop SUT: total_sample_count, performance_sample_count and tokens_per_sample must be integers"
        ) from None
    if total < 1 or not 1 <= perf <= total or tokens < 0:
        raise UsageError(
            "noop SUT: need 1 <= performance_sample_count <= total_sample_count and tokens_per_sample >= 0"
        )
    return NoopSUT(total, perf, tokens)
