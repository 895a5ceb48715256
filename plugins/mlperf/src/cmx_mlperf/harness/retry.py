"""Runs that take what they ask, even on a busy machine: when a performance run is INVALID
only because it ended before its minimum duration, and the setting that decides how much
work LoadGen generates was derived by the calibration rather than given by the user, the
step raises that setting from what the run measured and runs again, as LoadGen's own advice
says ("Min duration satisfied: NO" -> "Increase expected QPS so the loadgen pre-generates
a larger (coalesced) query"), up to :data:`MAX_ATTEMPTS` times. Every attempt is recorded
in the result (``mlperf.attempts``); the last one is the result.

* **Offline**: LoadGen issues one query of ``expected_qps x min_duration x 1.1`` samples, so
  a run that ends early had too low an expected QPS: the next attempt asks for
  ``RAISE`` x the larger of the previous expected QPS and the throughput just measured.
* **SingleStream / MultiStream**: LoadGen pre-generates ``min_duration / expected_latency``
  queries, so a run that ends early had too high an expected latency: the next attempt
  expects the smaller of the previous value and the measured median, divided by ``RAISE``.
* **Server**: a run at a calibrated target QPS that misses its latency bounds (performance
  constraints or early stopping not met: "Reduce target QPS to improve latency") was loaded
  beyond what the SUT sustains on this machine now: the next attempt asks for the previous
  target divided by ``RAISE``.

A value the user set (``expected_qps``, ``expected_latency_ms``) is never changed: then the
run's verdict stands as LoadGen gave it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cmx_mlperf.harness.config import needs_calibration
from cmx_mlperf.harness.mllog import DetailLog
from cmx_mlperf.harness.spec import LoadgenSpec

MAX_ATTEMPTS = 3
RAISE = 2.0


def ended_too_early(log: DetailLog) -> bool:
    """INVALID with the minimum duration not met (whatever else also failed)."""
    return log.get("result_validity") == "INVALID" and log.get("result_min_duration_met") is False


def missed_latency(log: DetailLog) -> bool:
    """INVALID because the latency bounds were missed (a Server run loaded too much)."""
    return log.get("result_validity") == "INVALID" and (
        log.get("result_perf_constraints_met") is False or log.get("early_stopping_met") is False)


def next_spec(original: LoadgenSpec, current: LoadgenSpec, log: DetailLog,
              report: dict[str, Any]) -> LoadgenSpec | None:
    """The spec of the next attempt, or None when the run stands as it is."""
    if original.mode != "PerformanceOnly" or not needs_calibration(original):
        return None
    derived = report.get("derived") or {}
    if current.scenario == "Server" and missed_latency(log):
        previous = current.target_qps or derived.get("target_qps")
        if not isinstance(previous, (int, float)) or previous <= 1.0:
            return None
        return dataclasses.replace(current, target_qps=max(1.0, _round(previous / RAISE)))
    if not ended_too_early(log):
        return None
    if current.scenario == "Offline":
        previous = current.expected_qps or derived.get("expected_qps")
        measured = log.get("result_samples_per_second")
        base = max(float(v) for v in (previous, measured) if isinstance(v, (int, float))) \
            if isinstance(previous, (int, float)) or isinstance(measured, (int, float)) else None
        return None if base is None else dataclasses.replace(current, expected_qps=_round(RAISE * base))
    if current.scenario in ("SingleStream", "MultiStream"):
        previous = current.expected_latency_ms or derived.get("expected_latency_ms")
        p50 = log.get("result_50.00_percentile_latency_ns")
        candidates = [float(previous)] if isinstance(previous, (int, float)) else []
        candidates += [p50 / 1e6] if isinstance(p50, (int, float)) and p50 > 0 else []
        if not candidates:
            return None
        return dataclasses.replace(current, expected_latency_ms=max(0.001, _round(min(candidates) / RAISE)))
    return None


def with_calibration(report: dict[str, Any], calibrated: dict[str, Any] | None) -> dict[str, Any]:
    """The last attempt's report, keeping the settings the first attempt calibrated: a retry
    asks for values derived from them (recorded in ``attempts``) and so calibrates nothing
    itself, but the result still says what the calibration found."""
    if report.get("derived") or not calibrated:
        return report
    return {**report, "derived": calibrated}


def attempt_record(number: int, spec: LoadgenSpec, log: DetailLog, log_dir: str) -> dict[str, Any]:
    """What one attempt asked for and how it ended."""
    return {
        "attempt": number, "log_dir": log_dir, "expected_qps": spec.expected_qps, "target_qps": spec.target_qps,
        "expected_latency_ms": spec.expected_latency_ms, "result_validity": log.get("result_validity"),
        "min_duration_met": log.get("result_min_duration_met"),
    }


def _round(value: float) -> float:
    return float(f"{value:.4g}")
