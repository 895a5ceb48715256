"""Measure the SUT briefly before the LoadGen test, to derive the settings LoadGen needs
but the user left unset (workloads.md §1.3 items 5 and 6).

The measurement is a short *probe, then a bound*: a warm-up query, then growing batches
(1, 4, 16 ... samples), where no batch may be larger than what the best rate seen so far
fits into the budget that is left, so a slow SUT never overruns its budget by a large
batch (a 0.5 s budget once took 1.4 s). From it:

* **Offline**: LoadGen issues one query of ``expected_qps x min_duration x 1.1`` samples and
  the run is VALID only if it lasts ``min_duration``, so the expected QPS must be *above* the
  real throughput, but each unit above it lengthens the run: ``OFFLINE_FACTOR`` (1.25) x the
  best throughput measured, so the test lasts about 1.4 x min_duration. When the machine
  speeds up and the run ends early, :mod:`cmx_mlperf.harness.retry` raises the value and
  runs again.
* **Server**: the target QPS is ``SERVER_FACTOR`` (0.5) x the SUT's capacity: the larger of
  one-at-a-time queries (1 / median latency) and the batched throughput of the probe, so a
  batching server (vLLM) is loaded like one, not like a single-request server; at most
  ``MAX_SERVER_QPS`` (LoadGen's own scheduler limit on small machines). When the run then
  misses its latency bounds, the retry lowers it.
* **Server, AccuracyOnly**: every sample is issued once at the target QPS; LoadGen's default
  of 1 QPS would take hours for a real dataset, so it is the measured throughput
  (``ACCURACY_FACTOR``): the run takes about as long as the SUT needs, latency does not count.
* **SingleStream / MultiStream**: LoadGen pre-generates ``min_duration / expected_latency``
  queries, so the expected latency must be *below* the real one: ``LATENCY_FACTOR`` (0.8) x
  the measured median query latency, never below ``MIN_EXPECTED_LATENCY_MS``.

The measurement calls the SUT directly (LoadGen is not running yet) for about
``budget_s`` seconds after the warm-up query; it is recorded in the result's
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

OFFLINE_FACTOR = 1.25
SERVER_FACTOR = 0.5
ACCURACY_FACTOR = 1.0
LATENCY_FACTOR = 0.8
GROWTH = 4
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
    mode: str = "PerformanceOnly"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def budget_for(duration_s: float | None) -> float:
    """A short measurement: 5 % of the test's min duration, between 0.5 s and 3 s."""
    return min(3.0, max(0.5, 0.05 * (duration_s if duration_s is not None else 600.0)))


@dataclass(frozen=True)
class CalibrationSpec:
    """What :func:`calibrate` measures: the test's ``scenario`` and ``mode``, the samples a
    MultiStream query holds, about how long to measure (``budget_s``) and how long one batch of
    samples may take before the SUT is called stuck (``timeout_s``)."""

    scenario: str
    samples_per_query: int
    budget_s: float
    timeout_s: float
    mode: str = "PerformanceOnly"


def calibrate(sut: Any, completer: LoadgenCompleter, measure: CalibrationSpec) -> Calibration:
    """Run the SUT outside LoadGen; ``completer`` is back in LoadGen mode afterwards."""
    loaded = list(range(min(sut.performance_sample_count or sut.total_sample_count,
                            sut.total_sample_count)))
    sut.load_samples(loaded)
    completer.count_only()
    try:
        probe = _Probe(sut, completer, loaded, measure.timeout_s)
        if measure.scenario == "Offline" or measure.mode == "AccuracyOnly":
            return _throughput(probe, measure.scenario, measure.budget_s, measure.mode)
        if measure.scenario == "Server":
            return _server(probe, measure.budget_s)
        return _latency(probe, measure.scenario, measure.samples_per_query, measure.budget_s)
    finally:
        completer.to_loadgen()
        sut.unload_samples(loaded)


@dataclass(frozen=True)
class _Probe:
    """The SUT, outside LoadGen, with the samples loaded for calibration."""

    sut: Any
    completer: LoadgenCompleter
    loaded: list[int]
    timeout_s: float

    def run(self, n: int) -> float:
        """Issue ``n`` samples at once; seconds until all of them completed."""
        start_id = self.completer.count
        reached = self.completer.expect(start_id + n)
        ids = list(range(start_id, start_id + n))
        indices = [self.loaded[i % len(self.loaded)] for i in ids]
        began = time.perf_counter()
        self.sut.issue(ids, indices)
        if not reached.wait(self.timeout_s):
            raise StepFailed(
                f"mlperf.loadgen: the {self.sut.name} SUT did not complete {n} calibration sample(s) "
                f"within {self.timeout_s:.0f} s; set expected_qps/target_qps/expected_latency_ms to skip "
                "calibration, or check the SUT"
            )
        return time.perf_counter() - began


def next_batch(batch: int, best_sps: float, remaining_s: float) -> int | None:
    """The bound of the probe: the next batch grows by ``GROWTH`` but holds no more samples
    than the best rate seen fits into the budget left; None when not even ``batch`` fits."""
    fits = int(remaining_s * best_sps)
    if remaining_s <= 0 or fits < batch or batch >= MAX_BATCH:
        return None
    return min(batch * GROWTH, fits, MAX_BATCH)


def _best_throughput(probe: _Probe, budget_s: float) -> tuple[int, float, float]:
    """Growing, bounded batches for about ``budget_s``: (samples, seconds, best samples/s)."""
    total, spent, batch, best = 0, 0.0, 1, 0.0
    while True:
        elapsed = probe.run(batch)
        total, spent = total + batch, spent + elapsed
        best = max(best, batch / max(elapsed, 1e-9))
        following = next_batch(batch, best, budget_s - spent)
        if following is None:
            return total, spent, best
        batch = following


def _throughput(probe: _Probe, scenario: str, budget_s: float, mode: str) -> Calibration:
    probe.run(1)  # warm-up
    total, spent, best = _best_throughput(probe, budget_s)
    return Calibration(scenario, total, round(spent, 6), throughput_sps=best, mode=mode)


def _median_latency(probe: _Probe, per_query: int, budget_s: float) -> tuple[int, float, float]:
    """One query at a time for about ``budget_s``: (queries, seconds, median seconds)."""
    latencies: list[float] = []
    spent = 0.0
    while spent < budget_s and len(latencies) < 10_000:
        elapsed = probe.run(per_query)
        latencies.append(elapsed)
        spent += elapsed
    return len(latencies), spent, statistics.median(latencies)


def _server(probe: _Probe, budget_s: float) -> Calibration:
    """Half the budget for single-query latency, half for the batched throughput."""
    probe.run(1)  # warm-up
    queries, latency_spent, median_s = _median_latency(probe, 1, budget_s / 2)
    total, spent, best = _best_throughput(probe, budget_s / 2)
    return Calibration("Server", queries + total, round(latency_spent + spent, 6),
                       throughput_sps=best, median_query_latency_ms=median_s * 1000)


def _latency(probe: _Probe, scenario: str, per_query: int, budget_s: float) -> Calibration:
    probe.run(per_query)  # warm-up
    queries, spent, median_s = _median_latency(probe, per_query, budget_s)
    return Calibration(scenario, queries * per_query, round(spent, 6),
                       median_query_latency_ms=median_s * 1000)


def derive(calibration: Calibration, duration_s: float | None) -> Derived:
    """The LoadGen settings implied by a calibration (see the module docstring)."""
    if calibration.scenario == "Offline":
        cap = MAX_OFFLINE_SAMPLES / (1.1 * (duration_s if duration_s is not None else 600.0))
        qps = min(OFFLINE_FACTOR * (calibration.throughput_sps or 1.0), cap)
        return Derived(expected_qps=_round(qps))
    if calibration.scenario == "Server":
        return Derived(target_qps=_round(min(_server_qps(calibration), MAX_SERVER_QPS)))
    latency = LATENCY_FACTOR * (calibration.median_query_latency_ms or 1.0)
    return Derived(expected_latency_ms=max(MIN_EXPECTED_LATENCY_MS, float(f"{latency:.4g}")))


def _server_qps(calibration: Calibration) -> float:
    if calibration.mode == "AccuracyOnly":
        return ACCURACY_FACTOR * (calibration.throughput_sps or 1.0)
    single = 1000.0 / (calibration.median_query_latency_ms or 1000.0)
    return SERVER_FACTOR * max(single, calibration.throughput_sps or 0.0)


def _round(value: float) -> float:
    return max(1.0, float(f"{value:.4g}"))
