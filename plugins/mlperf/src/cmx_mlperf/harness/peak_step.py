"""Mode PeakQPS of the ``mlperf.loadgen`` step: every trial of :mod:`cmx_mlperf.harness.peak`
is one ordinary LoadGen ``PerformanceOnly`` Server test in its own child process; the result
is the part of the peak point (the highest VALID QPS) with ``mlperf.peak_search`` added.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx_core.api import Artifact, Metric, ResultPart
from cmx_core.errors import StepFailed
from cmx_mlperf.harness import curve
from cmx_mlperf.harness.mllog import DetailLog, parse_detail
from cmx_mlperf.harness.peak import Point, Search, Trial, Verdict, classify, queries_needed, search
from cmx_mlperf.harness.result import build_part
from cmx_mlperf.harness.runner import ChildRun, fresh_log_dir, run_child
from cmx_mlperf.harness.spec import LoadgenSpec

DETAIL = "mlperf_log_detail.txt"
DEFAULT_RUNS = 8  # the llama recipe's defaults, for a step whose with: leaves them out
DEFAULT_SWEEP = 4
BLOCKER = "PeakQPS is an exploration mode, not a submission run"
log = logging.getLogger("cmx.mlperf.peak")


@dataclass
class Runner:
    """Runs trials for one search and keeps each point's result part and log directory."""

    spec: LoadgenSpec
    work_dir: Path
    run_dir: Path
    timeout_s: float | None
    metrics_file: Path | None = None
    """The step's application channel: each trial's LoadGen child reports its progress there."""
    parts: dict[str, ResultPart] = field(default_factory=dict)
    dirs: dict[str, Path] = field(default_factory=dict)

    def __call__(self, trial: Trial) -> Point:
        spec = dataclasses.replace(self.spec, mode="PerformanceOnly", target_qps=trial.target_qps)
        if trial.min_query_count is not None:
            spec = dataclasses.replace(spec, min_query_count=trial.min_query_count)
        log_dir = fresh_log_dir(self.work_dir, f"point-{len(self.dirs) + 1:02d}")
        shown = shown_path(log_dir, self.run_dir)
        log.debug("PeakQPS %s: trying %s", trial.phase, _asked(trial))  # the verdict line is the INFO one
        try:
            child = run_child(spec, log_dir, self.timeout_s, self.metrics_file)
            detail = parse_detail(child.log_dir / DETAIL)
        except StepFailed as exc:
            if not self.parts:
                raise  # nothing was measured yet: the step fails as a plain run would
            self.dirs[shown] = log_dir
            return Point(trial.target_qps or 0.0, Verdict.FAILED, None, (str(exc),), trial.phase, shown,
                         min_query_count=spec.min_query_count)
        part = build_part(detail, spec, child.report, shown)
        self.parts[shown] = part
        self.dirs[shown] = log_dir
        return point_of(detail, part, child, trial, spec, shown)


def point_of(detail: DetailLog, part: ResultPart, child: ChildRun, trial: Trial, spec: LoadgenSpec,
             shown: str) -> Point:
    """The search's view of one measured run."""
    qps = detail.get("effective_target_qps")
    if not isinstance(qps, (int, float)):
        qps = (child.report.get("derived") or {}).get("target_qps") or trial.target_qps or 0.0
    value = {name: metric.value for name, metric in part.metrics.items()}
    return Point(
        target_qps=float(qps), verdict=classify(detail, bool(child.report.get("sut_errors"))),
        result_validity=detail.get("result_validity"), reasons=tuple(part.invalid_reasons), phase=trial.phase,
        log_dir=shown, query_count=detail.get("result_query_count"), queries_needed=queries_needed(detail),
        min_query_count=spec.min_query_count, completed_qps=value.get("completed_samples_per_second"),
        tokens_per_second=value.get("tokens_per_second"), ttft_p99_ns=value.get("ttft_p99_ns"),
        tpot_p99_ns=value.get("tpot_p99_ns"), latency_p99_ns=value.get("latency_p99_ns"),
    )


@dataclass(frozen=True)
class PeakRun:
    """What the step returns: the result part, the log directory of the point it shows, the
    whole search and the curve files."""

    part: ResultPart
    log_dir: Path
    search: Search
    curve_files: tuple[Artifact, ...]


def run_peak(spec: LoadgenSpec, work_dir: Path, run_dir: Path, timeout_s: float | None,
             metrics_file: Path | None = None) -> PeakRun:
    """Search, sweep, write the curve."""
    _ensure_handler()
    runner = Runner(spec, work_dir, run_dir, timeout_s, metrics_file)
    found = search(runner, spec.target_qps, spec.search_runs or DEFAULT_RUNS,
                   spec.sweep_points if spec.sweep_points is not None else DEFAULT_SWEEP, log=_progress)
    chosen = found.peak or found.points[0]
    part = peak_part(runner.parts[chosen.log_dir], found, calibrated=spec.target_qps is None)
    files = [curve.write_csv(found, work_dir), curve.write_png(found, work_dir)]
    kinds = {curve.CSV_NAME: "peak_curve_csv", curve.PNG_NAME: "peak_curve_png"}
    artifacts = tuple(Artifact(path, kinds[path.name]) for path in files if path is not None)
    return PeakRun(part, runner.dirs[chosen.log_dir], found, artifacts)


def peak_part(base: ResultPart, found: Search, calibrated: bool = True) -> ResultPart:
    """The chosen point's part as the step's result: mode PeakQPS, the search section, the
    ``peak_qps`` metric, the exploration-mode blocker; invalid when no point was VALID."""
    mlperf = dict(base.sections["mlperf"])
    mlperf["peak_search"] = search_section(found)
    mlperf["submission_blockers"] = [*mlperf.get("submission_blockers", []), BLOCKER]
    metrics = dict(base.metrics)
    metrics["peak_qps"] = Metric(found.peak.target_qps if found.peak else None, "queries/s", True)
    benchmark = {**base.benchmark, "mode": "PeakQPS"}
    if found.peak is not None:
        return dataclasses.replace(base, benchmark=benchmark, metrics=metrics,
                                   sections={**base.sections, "mlperf": mlperf})
    first = found.points[0]
    tried = ", ".join(f"{p.target_qps:g}" for p in found.points)
    start = "calibrated" if calibrated else "starting"
    reason = (f"no QPS was VALID (tried {tried}): even the {start} QPS {first.target_qps:g} was "
              f"{first.result_validity or 'not measured'}: {'; '.join(first.reasons) or 'no reason given'}")
    return dataclasses.replace(base, status="invalid", benchmark=benchmark, metrics=metrics,
                               invalid_reasons=(reason, *base.invalid_reasons),
                               sections={**base.sections, "mlperf": mlperf})


def search_section(found: Search) -> dict[str, Any]:
    """``mlperf.peak_search``: the peak, how the search ended, every point, the curve."""
    return {
        "peak_qps": found.peak.target_qps if found.peak else None,
        "peak_log_dir": found.peak.log_dir if found.peak else None,
        "tolerance": found.tolerance,
        "converged": found.converged,
        "stopped": found.stopped,
        "runs": sum(1 for p in found.points if p.phase == "search"),
        "sweep_runs": sum(1 for p in found.points if p.phase == "sweep"),
        "points": [p.as_dict() for p in found.points],
        "curve": [{key: p.as_dict()[key] for key in _CURVE_KEYS} for p in found.curve()],
    }


_CURVE_KEYS = ("target_qps", "result_validity", "verdict", "completed_qps", "tokens_per_second",
               "latency_p99_ns", "ttft_p99_ns", "tpot_p99_ns")


def shown_path(path: Path, run_dir: Path) -> str:
    """``path`` relative to the run directory when inside it (result documents move)."""
    try:
        return path.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def _asked(trial: Trial) -> str:
    if trial.target_qps is None:
        return "the calibrated QPS"
    extra = f" with min_query_count {trial.min_query_count}" if trial.min_query_count is not None else ""
    return f"{trial.target_qps:g} QPS{extra}"


def _progress(point: Point) -> None:
    log.info("PeakQPS %s: %g QPS -> %s (%s)%s", point.phase, point.target_qps, point.result_validity or "FAILED",
             point.verdict.value, f": {_why(point)}" if point.reasons else "")


def _why(point: Point) -> str:
    """The reasons in one short line, without LoadGen's long early-stopping paragraphs."""
    short = [r for r in point.reasons if not r.startswith("*")] or list(point.reasons)
    text = "; ".join(short)
    return text if len(text) <= 200 else text[:197] + "..."


def _ensure_handler() -> None:
    """cmx configures no logging; give this logger a stderr line of its own when nothing else would
    show INFO records, so a long search shows its progress."""
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
