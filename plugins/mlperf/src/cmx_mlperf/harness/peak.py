"""The PeakQPS search: the highest Server QPS that LoadGen calls VALID, then a sweep to 1.2x it.

This module is the pure decision logic; :mod:`cmx_mlperf.harness.peak_step` runs each trial
as one ordinary LoadGen ``PerformanceOnly`` Server test in its own child process.

How it decides (see ``docs/mlperf-peak-qps.md``):

* The first trial lets the child calibrate (or uses the user's ``target_qps``).
* Bracketing: from the highest VALID QPS, grow x :data:`GROWTH` until a run bounds the QPS
  from above; from an INVALID start, halve until a run is VALID.
* Bisection between the highest VALID and the lowest bounding QPS above it, until they are
  within :data:`TOLERANCE` of each other or ``runs`` trials are spent.
* Only some INVALID runs bound the QPS from above (:func:`classify`): a performance-constraint
  (TTFT / TPOT / latency p99) violation, failed samples of the SUT, or early stopping that
  still could not confirm the limits after a rerun with the queries LoadGen asked for. A run
  INVALID only for too few queries or too short a duration says nothing about the load; it is
  run once more at the same QPS with ``min_query_count`` raised to what LoadGen said it needs.
* The sweep adds ``sweep_points`` trials evenly spaced above the lowest tested QPS up to
  :data:`SWEEP_TOP` x the peak; a QPS already measured (within :data:`REUSE`) is not rerun.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from cmx_mlperf.harness.mllog import DetailLog

GROWTH = 2.0
TOLERANCE = 0.10  # the search ends when the lowest bounding QPS <= (1 + TOLERANCE) x the peak
SWEEP_TOP = 1.2
REUSE = 0.02  # a measured QPS within 2 % of a sweep target stands for it
RERUN_MARGIN = 1.1  # a rerun asks for 10 % more queries than LoadGen said it needs
MAX_RERUN_FACTOR = 8  # a rerun never asks for more than 8x the queries the run processed
_NEEDED = re.compile(r"Processed (\d+) queries.*?at least (\d+) more queries", re.S)


class Verdict(str, enum.Enum):
    """What one run says about its QPS."""

    VALID = "valid"
    LATENCY = "latency"  # performance constraints not met: the load is too high
    SUT_ERRORS = "sut_errors"  # the SUT failed samples: the endpoint broke under this load
    QUERIES = "queries"  # only count / duration / early-stopping checks failed: undecided
    UNCONFIRMED = "unconfirmed"  # still QUERIES after a rerun with the queries LoadGen asked for
    FAILED = "failed"  # the test itself failed (child error or timeout): the search stops

    @property
    def bounds(self) -> bool:
        """True when the run bounds the QPS from above."""
        return self in (Verdict.LATENCY, Verdict.SUT_ERRORS, Verdict.UNCONFIRMED)


@dataclass(frozen=True)
class Trial:
    """One LoadGen test the search asks for. ``target_qps`` None: the child calibrates;
    ``min_query_count`` None: the spec's own."""

    target_qps: float | None
    phase: str = "search"
    min_query_count: int | None = None


@dataclass(frozen=True)
class Point:
    """One measured trial (numbers are None where the run did not measure them)."""

    target_qps: float
    verdict: Verdict
    result_validity: str | None
    reasons: tuple[str, ...] = ()
    phase: str = "search"
    log_dir: str = ""
    query_count: int | None = None
    queries_needed: int | None = None  # LoadGen's early stopping: total queries it would need
    min_query_count: int | None = None
    completed_qps: float | None = None
    tokens_per_second: float | None = None
    ttft_p99_ns: float | None = None
    tpot_p99_ns: float | None = None
    latency_p99_ns: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "target_qps": self.target_qps, "result_validity": self.result_validity,
            "verdict": self.verdict.value, "reasons": list(self.reasons), "phase": self.phase,
            "completed_qps": self.completed_qps, "tokens_per_second": self.tokens_per_second,
            "ttft_p99_ns": self.ttft_p99_ns, "tpot_p99_ns": self.tpot_p99_ns,
            "latency_p99_ns": self.latency_p99_ns, "query_count": self.query_count,
            "min_query_count": self.min_query_count, "log_dir": self.log_dir,
        }


@dataclass(frozen=True)
class Search:
    """Every point in the order it ran, the peak (None: no VALID point) and how it ended."""

    points: tuple[Point, ...]
    peak: Point | None
    converged: bool
    stopped: str
    tolerance: float = TOLERANCE

    def curve(self) -> list[Point]:
        """The measured points (not the failed ones) sorted by QPS: the throughput-latency curve."""
        return sorted((p for p in self.points if p.verdict is not Verdict.FAILED), key=lambda p: p.target_qps)


Measure = Callable[[Trial], Point]


def classify(log: DetailLog, sut_errors: bool) -> Verdict:
    """The verdict class of one parsed Server run (see the module docstring)."""
    if sut_errors:
        return Verdict.SUT_ERRORS
    if log.get("result_validity") == "VALID":
        return Verdict.VALID
    if log.get("result_perf_constraints_met") is False:
        return Verdict.LATENCY
    checks = ("result_min_duration_met", "result_min_queries_met", "early_stopping_met")
    if any(log.get(key) is False for key in checks):
        return Verdict.QUERIES
    return Verdict.LATENCY  # INVALID with no known check failed: LoadGen's verdict stands


def queries_needed(log: DetailLog) -> int | None:
    """The total number of queries LoadGen's early stopping says the run would need."""
    needed = []
    for key in ("early_stopping_result", "early_stopping_ttft_result", "early_stopping_tpot_result"):
        match = _NEEDED.search(str(log.get(key) or ""))
        if match:
            needed.append(int(match.group(1)) + int(match.group(2)))
    return max(needed) if needed else None


def rounded(qps: float) -> float:
    """QPS values the search asks for: 4 significant digits."""
    return float(f"{qps:.4g}")


def search(measure: Measure, first_qps: float | None, runs: int, sweep_points: int,
           tolerance: float = TOLERANCE, log: Callable[[Point], None] | None = None) -> Search:
    """Run the bracketing search and the sweep; ``measure`` runs one trial."""
    points: list[Point] = []

    def take(trial: Trial) -> Point:
        point = measure(trial)
        if point.verdict is Verdict.QUERIES and trial.min_query_count is not None:
            point = replace(point, verdict=Verdict.UNCONFIRMED, reasons=(
                *point.reasons, f"still too few queries with min_query_count {trial.min_query_count}"))
        elif point.verdict is Verdict.QUERIES and rerun_queries(point)[0] is None:
            point = replace(point, verdict=Verdict.UNCONFIRMED, reasons=(*point.reasons, rerun_queries(point)[1]))
        points.append(point)
        if log is not None:
            log(point)
        return point

    trial: Trial | None = Trial(first_qps)
    stopped = ""
    while trial is not None:
        if len(points) >= runs:
            stopped = f"search_runs {runs} spent"
            break
        take(trial)
        trial, stopped = _next_trial(points, tolerance)
    peak = _peak(points)
    if peak is not None and points[-1].verdict is not Verdict.FAILED:
        for target in sweep_targets(points, peak.target_qps, sweep_points):
            if take(Trial(target, phase="sweep")).verdict is Verdict.FAILED:
                break
    converged = stopped.startswith("converged")
    return Search(tuple(points), peak, converged, stopped, tolerance)


def _peak(points: list[Point]) -> Point | None:
    valid = [p for p in points if p.verdict is Verdict.VALID and p.phase == "search"]
    return max(valid, key=lambda p: p.target_qps) if valid else None


def bracket(points: list[Point]) -> tuple[float | None, float | None]:
    """The highest VALID QPS and the lowest bounding QPS above it (None where missing)."""
    valid = [p.target_qps for p in points if p.verdict is Verdict.VALID]
    low = max(valid) if valid else None
    above = [p.target_qps for p in points if p.verdict.bounds and (low is None or p.target_qps > low)]
    return low, (min(above) if above else None)


def _next_trial(points: list[Point], tolerance: float) -> tuple[Trial | None, str]:
    """The next trial, or None and why the search ends."""
    last = points[-1]
    if last.verdict is Verdict.FAILED:
        return None, f"a LoadGen test failed at {last.target_qps:g} QPS"
    queries = rerun_queries(last)[0] if last.verdict is Verdict.QUERIES else None
    if queries is not None and last.phase == "search":
        return Trial(last.target_qps, min_query_count=queries), ""
    low, high = bracket(points)
    if low is not None and high is not None and high <= low * (1 + tolerance):
        return None, f"converged: {low:g} VALID, {high:g} bounds it (within {tolerance:.0%})"
    if high is None:
        target = rounded(GROWTH * low) if low is not None else None
    elif low is None:
        target = rounded(high / GROWTH)
    else:
        target = rounded((low + high) / 2)
    if target is None or any(p.target_qps == target for p in points):
        return None, f"converged: no QPS left to try between {low} and {high}"
    return Trial(target), ""


def rerun_queries(point: Point) -> tuple[int | None, str]:
    """The ``min_query_count`` of a rerun of a QUERIES point (what LoadGen said it needs, plus
    a margin), or None and why not: a rerun over :data:`MAX_RERUN_FACTOR` x the queries of
    the run would be a long test for a point that is close to its limits anyway."""
    processed = point.query_count or 0
    wanted = point.queries_needed or 2 * max(processed, 1)
    queries = math.ceil(round(RERUN_MARGIN * wanted, 6))  # 1.1 x 150 is 165, not 166
    if processed and queries > MAX_RERUN_FACTOR * processed:
        return None, f"a rerun would need {queries} queries, over {MAX_RERUN_FACTOR}x the {processed} of this run"
    return queries, ""


def sweep_targets(points: list[Point], peak_qps: float, count: int) -> list[float]:
    """``count`` QPS values evenly spaced above the lowest tested QPS up to 1.2x the peak,
    less those already measured (within :data:`REUSE`)."""
    if count <= 0:
        return []
    low, top = min(p.target_qps for p in points), SWEEP_TOP * peak_qps
    targets = [rounded(low + (top - low) * i / count) for i in range(1, count + 1)]
    measured = [p.target_qps for p in points if p.verdict is not Verdict.FAILED]
    return [t for t in targets if not any(abs(m - t) <= REUSE * t for m in measured)]
