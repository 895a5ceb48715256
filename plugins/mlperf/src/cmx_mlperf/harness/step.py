"""The ``mlperf.loadgen`` step: validate, run the child, parse, return the result part."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cmx_core.api import Artifact, ResultPart, StepContext, StepOutput
from cmx_mlperf.harness import accuracy as acc
from cmx_mlperf.harness import retry
from cmx_mlperf.harness.config import OFFICIAL_MIN_DURATION_MS
from cmx_mlperf.harness.mllog import DetailLog, parse_detail
from cmx_mlperf.harness.peak_step import run_peak, shown_path
from cmx_mlperf.harness.result import build_part
from cmx_mlperf.harness.runner import fresh_log_dir, run_child
from cmx_mlperf.harness.spec import LoadgenSpec, spec_from_params

DETAIL = "mlperf_log_detail.txt"
SUMMARY = "mlperf_log_summary.txt"
_ARTIFACTS = ((DETAIL, "mlperf_log_detail"), (SUMMARY, "mlperf_log_summary"),
              (acc.ACCURACY_LOG, "mlperf_log_accuracy"), (acc.ACCURACY_TXT, "accuracy"),
              ("user.conf", "user_conf"), ("power_series.csv", "power_series"))


def run_step(ctx: StepContext) -> StepOutput:
    original = spec_from_params(ctx.params)
    timeout = original.timeout_s or ctx.timeout_s
    if original.mode == "PeakQPS":
        return _peak_step(ctx, original, timeout)
    spec, attempts, calibrated = original, [], None
    for number in range(1, retry.MAX_ATTEMPTS + 1):
        ctx.log.info("%s", expected_duration_line(spec, number))
        child = run_child(spec, fresh_log_dir(ctx.work_dir), timeout, ctx.metrics.metrics_file)
        calibrated = calibrated or child.report.get("derived")
        log = parse_detail(child.log_dir / DETAIL)
        attempts.append(retry.attempt_record(number, spec, log, _shown(child.log_dir, ctx.run_dir)))
        following = retry.next_spec(original, spec, log, child.report)
        if following is None or number == retry.MAX_ATTEMPTS:
            break
        spec = following
    report = retry.with_calibration(child.report, calibrated)
    part = build_part(log, spec, report, _shown(child.log_dir, ctx.run_dir))
    _report(ctx, log, part, len(attempts))
    if len(attempts) > 1:  # the run was repeated: every attempt stays in the record
        part = replace(part, sections={**part.sections, "mlperf": {**part.sections["mlperf"], "attempts": attempts}})
    return _output(part, child.log_dir)


def _report(ctx: StepContext, log: DetailLog, part: ResultPart, attempts: int) -> None:
    """The test's numbers on the application channel (cmx-core's docs/telemetry.md): the
    completed queries, every numeric metric (QPS, tokens/s, latencies) and the attempts."""
    queries = log.get("result_query_count")
    if isinstance(queries, (int, float)) and not isinstance(queries, bool):
        ctx.report("completed_queries", float(queries), kind="counter")
    for name, metric in part.metrics.items():
        if isinstance(metric.value, (int, float)) and not isinstance(metric.value, bool):
            ctx.report(name, float(metric.value))
    ctx.report("loadgen_attempts", float(attempts))


def expected_duration_line(spec: LoadgenSpec, attempt: int) -> str:
    """The progress line before a LoadGen test: how long LoadGen will at least run it.
    A performance test lasts at least ``min_duration`` (``duration_s``, else the embedded
    mlperf.conf's 600 s); an accuracy pass runs the whole dataset once, however long it takes."""
    where = f"mlperf.loadgen: {spec.scenario} {spec.mode} test" + (f" (attempt {attempt})" if attempt > 1 else "")
    if spec.mode == "AccuracyOnly":
        return f"{where}: one pass over the accuracy samples; its length depends on the SUT"
    seconds = spec.duration_s if spec.duration_s is not None else OFFICIAL_MIN_DURATION_MS / 1000
    origin = "duration_s" if spec.duration_s is not None else "mlperf.conf's min_duration"
    return f"{where}: expected to run at least {seconds:g} s ({origin})"


def _peak_step(ctx: StepContext, spec: LoadgenSpec, timeout: float | None) -> StepOutput:
    """Mode PeakQPS: a search of several LoadGen tests (:mod:`cmx_mlperf.harness.peak_step`)."""
    peak = run_peak(spec, ctx.work_dir, ctx.run_dir, timeout, ctx.metrics.metrics_file)
    out = _output(peak.part, peak.log_dir)
    return replace(out, outputs={**out.outputs, "peak_qps": peak.part.metrics["peak_qps"].value},
                   artifacts=(*out.artifacts, *peak.curve_files))


def _output(part: ResultPart, log_dir: Path) -> StepOutput:
    """The step's outputs and artifacts for the run whose logs are in ``log_dir``."""
    artifacts = tuple(Artifact(log_dir / name, kind) for name, kind in _ARTIFACTS if (log_dir / name).is_file())
    outputs = {
        "status": part.status,
        "log_dir": str(log_dir),
        "result": part.sections["mlperf"]["summary"]["result"],
        "units": part.sections["mlperf"]["summary"]["units"],
        "primary_metric": part.benchmark["primary_metric"],
        **{name: metric.value for name, metric in part.metrics.items()},
    }
    return StepOutput(outputs=outputs, result=part, artifacts=artifacts)


_shown = shown_path
