"""Measure the SUT briefly before the LoadGen test, to derive the settings LoadGen needs
but the user left unset (workloads.md §1.3 items 5 and 6):

* **Offline**: LoadGen issues one query of ``expected_qps x min_duration x 1.1`` samples and
  the run is VALID only if it lasts ``min_duration``, so the expected QPS must be *above* the
  real throughput: the harness uses ``OFFLINE_FACTOR`` (2) x the best throughput measured
  with batches of 1, 4, 16 ... samples (growing until the budget is spent, so a batching SUT
  shows its batched rate).
* **Server**: the target QPS defaults to ``SERVER_FACTOR`` (0.5) / the measured median
  latency of one-sample queries issued one at a time, at most ``MAX_SERVER_QPS`` (LoadGen's
  own scheduler limit on small machines): a load the SUT can sustain even without batching
  (FindPeakPerformance searches upward from it).
* **SingleStream / MultiStream**: LoadGen pre-generates ``min_duration / expected_latency``
  queries, so the expected latency must be *below* the real one: ``LATENCY_FACTOR`` (0.5) x
  the measured median query latency, never below ``MIN_EXPECTED_LATENCY_MS``.

The measurement calls the SUT directly (LoadGen is not running yet) for at most
``budget_s`` seconds after a first warm-up query; it is recorded in the result's
``mlperf.calibration``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from cmx_core.errors import StepFailed
from cmx_mlperf.harness.completer import LoadgenCompleter
from cmx_mlperf.harness.config import Derived

OFFLINE_FACTOR = 2.0
SERVER_FACTOR = 0.5
LATENCY_FACTOR = 0.5
MIN_EXPECTED_LATENCY_MS = 0.001
MAX_BATCH = 1 << 16
#: Largest Offline query the derived expected QPS may ask for (LoadGen holds the whole
#: query in memory: about 0.4 KB per sample). Only no-op-fast SUTs reach it.
MAX_OFFLINE_SAMPLES = 4_000_000
MAX_SERVER_QPS = 20_000.0


@dataclass(frozen=True)
class Calibration:
    scenario: str
    samples: int
    elapsed_s: float
    throughput_sps: float | None = None
    median_query_latency_ms: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def budget_for(duration_s: float | None) -> float:
    """A short measurement: 5 % of the test's min duration, between 0.5 s and 3 s."""
    return min(3.0, max(0.5, 0.05 * (duration_s if duration_s is not None else 600.0)))


def calibrate(
    sut: Any, completer: LoadgenCompleter, scenario: str, samples_per_query: int,
    budget_s: float, timeout_s: float,
) -> Calibration:
    """Run the SUT outside LoadGen; ``completer`` is back in LoadGen mode afterwards."""
    loaded = list(range(min(sut.performance_sample_count or sut.total_sample_count,
                            sut.total_sample_count)))
    sut.load_samples(loaded)
    completer.count_only()
    try:
        if scenario == "Offline":
            return _throughput(sut, completer, loaded, scenario, budget_s, timeout_s)
        return _latency(sut, completer, loaded, scenario, samples_per_query, budget_s, timeout_s)
    finally:
        completer.to_loadgen()
        sut.unload_samples(loaded)


def _issue_and_wait(
    sut: Any, completer: LoadgenCompleter, loaded: list[int], n: int, timeout_s: float
) -> float:
    start_id = completer.count
    reached = completer.expect(start_id + n)
    ids = list(range(start_id, start_id + n))
    indices = [loaded[i % len(loaded)] for i in ids]
    began = time.perf_counter()
    sut.issue(ids, indices)
    if not reached.wait(timeout_s):
        raise StepFailed(
            f"mlperf.loadgen: the {sut.name} SUT did not complete {n} calibration sample(s) "
            f"within {timeout_s:.0f} s; set expected_qps/target_qps/expected_latency_ms to skip "
            "calibration, or check the SUT"
        )
    return time.perf_counter() - began


def _throughput(sut: Any, completer: LoadgenCompleter, loaded: list[int], scenario: str,
                budget_s: float, timeout_s: float) -> Calibration:
    _issue_and_wait(sut, completer, loaded, 1, timeout_s)  # warm-up
    total, spent, batch, best = 0, 0.0, 1, 0.0
    while True:
        elapsed = _issue_and_wait(sut, completer, loaded, batch, timeout_s)
        total, spent = total + batch, spent + elapsed
        best = max(best, batch / max(elapsed, 1e-9))
        if spent >= budget_s or batch >= MAX_BATCH:
            break
        batch *= 4
    return Calibration(scenario, total, round(spent, 6), throughput_sps=best)


def _latency(sut: Any, completer: LoadgenCompleter, loaded: list[int], scenario: str,
             per_query: int, budget_s: float, timeout_s: float) -> Calibration:
    _issue_and_wait(sut, completer, loaded, per_query, timeout_s)  # warm-up
    latencies: list[float] = []
    spent = 0.0
    while spent < budget_s and len(latencies) < 10_000:
        elapsed = _issue_and_wait(sut, completer, loaded, per_query, timeout_s)
        latencies.append(elapsed)
        spent += elapsed
    median_ms = statistics.median(latencies) * 1000
    return Calibration(scenario, len(latencies) * per_query, round(spent, 6),
                       median_query_latency_ms=median_ms)


def derive(calibration: Calibration, duration_s: float | None) -> Derived:
    """The LoadGen settings implied by a calibration (see the module docstring)."""
    if calibration.scenario == "Offline":
        cap = MAX_OFFLINE_SAMPLES / (1.1 * (duration_s if duration_s is not None else 600.0))
        qps = min(OFFLINE_FACTOR * (calibration.throughput_sps or 1.0), cap)
        return Derived(expected_qps=_round(qps))
    if calibration.scenario == "Server":
        latency_s = (calibration.median_query_latency_ms or 1000.0) / 1000
        return Derived(target_qps=_round(min(SERVER_FACTOR / latency_s, MAX_SERVER_QPS)))
    latency = LATENCY_FACTOR * (calibration.median_query_latency_ms or 1.0)
    return Derived(expected_latency_ms=max(MIN_EXPECTED_LATENCY_MS, float(f"{latency:.4g}")))


def _round(value: float) -> float:
    return max(1.0, float(f"{value:.4g}"))
