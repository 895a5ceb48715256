"""Parse ``mlperf_log_detail.txt``: one ``:::MLLOG {json}`` per line (workloads.md §1.4).

The detail log, not the human summary, is the source of truth: summary labels drift
between LoadGen versions, MLLOG keys do not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx_core.errors import StepFailed

PREFIX = ":::MLLOG "
PERCENTILES = (("50.00", "p50"), ("90.00", "p90"), ("95.00", "p95"), ("97.00", "p97"),
               ("99.00", "p99"), ("99.90", "p99_9"))


@dataclass(frozen=True)
class DetailLog:
    """The last value of every key, plus LoadGen's error and warning messages."""

    values: dict[str, Any]
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def latency_ns(self) -> dict[str, Any]:
        """Query latency summary (``result_*_latency_ns``)."""
        out = {s: self.get(f"result_{s}_latency_ns") for s in ("min", "mean", "max")}
        out.update({name: self.get(f"result_{pct}_percentile_latency_ns") for pct, name in PERCENTILES})
        return out

    def ttft_ns(self) -> dict[str, Any]:
        """Time-to-first-token summary (``result_first_token_*``); all None without tokens."""
        out = {s: self.get(f"result_first_token_{s}_latency_ns") for s in ("min", "mean", "max")}
        out.update({name: self.get(f"result_first_token_{pct}_percentile_latency_ns")
                    for pct, name in PERCENTILES})
        return out

    def tpot_ns(self) -> dict[str, Any]:
        """Time-per-output-token summary. LoadGen 6.0.17 logs min/max/mean under
        ``result_time_to_output_token_*`` and percentiles under
        ``result_time_per_output_token_*``; both spellings are read."""
        out = {s: self._first(f"result_time_per_output_token_{s}", f"result_time_to_output_token_{s}")
               for s in ("min", "mean", "max")}
        out.update({name: self._first(f"result_time_per_output_token_{pct}_percentile_ns",
                                      f"result_time_to_output_token_{pct}_percentile_ns")
                    for pct, name in PERCENTILES})
        return out

    def _first(self, *keys: str) -> Any:
        for key in keys:
            if key in self.values:
                return self.values[key]
        return None


def parse_detail(path: Path) -> DetailLog:
    """Read a detail log; a missing file or one that did not reach the end of the test
    (``result_validity`` in performance modes; ``power_end`` in AccuracyOnly, which has no
    verdict) is a failed run."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise StepFailed(f"{path}: LoadGen wrote no detail log ({exc.strerror}); see child.log next to it") from None
    log = parse_lines(text.splitlines())
    finished = "result_validity" in log.values or (
        log.get("effective_test_mode") == "AccuracyOnly" and "power_end" in log.values)
    if not finished:
        raise StepFailed(f"{path}: LoadGen did not finish the test (no result_validity); see child.log next to it")
    return log


def parse_lines(lines: list[str]) -> DetailLog:
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for line in lines:
        start = line.find(PREFIX)
        if start < 0:
            continue
        try:
            entry = json.loads(line[start + len(PREFIX):])
        except json.JSONDecodeError:
            continue  # a line cut short by a crash; the keys we need come last anyway
        key, value = entry.get("key"), entry.get("value")
        if not isinstance(key, str):
            continue
        values[key] = value
        meta = entry.get("metadata") or {}
        if meta.get("is_error"):
            errors.append(f"{key}: {value}")
        elif meta.get("is_warning") and str(value) not in warnings:
            warnings.append(str(value))
    return DetailLog(values, tuple(errors), tuple(warnings))
