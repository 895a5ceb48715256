"""The mlperf.loadgen step against real LoadGen runs (each in its own child process,
min_duration 0.5-1 s), and the MLLOG parser against the logs those runs write."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import CmxError, StepFailed, UsageError
from cmx_core.testing import processes_with
from cmx_mlperf.harness.mllog import parse_detail, parse_lines
from cmx_mlperf.harness.step import run_step

PRIMARY = {
    "Offline": ("samples_per_second", "samples/s", "Samples/s"),
    "Server": ("completed_samples_per_second", "queries/s", "Queries/s"),
    "SingleStream": ("early_stopping_latency_ns", "ns", "Latency (ms)"),
    "MultiStream": ("early_stopping_latency_ns", "ns", "Latency (ms)"),
}


def _run(make_ctx: Any, **params: Any) -> Any:
    params.setdefault("sut", "noop")
    return run_step(make_ctx(params=params))


def _summary_value(log_dir: Path, label: str) -> float:
    text = (log_dir / "mlperf_log_summary.txt").read_text()
    match = re.search(rf"^{re.escape(label)}\s*:\s*(\S+)", text, re.MULTILINE)
    assert match, f"{label!r} not in the summary"
    return float(match.group(1))


@pytest.mark.parametrize("scenario", ["Offline", "Server", "SingleStream", "MultiStream"])
def test_each_scenario_runs_valid_and_parses(cmx_home: Path, cmx_step_context: Any, scenario: str) -> None:
    out = _run(cmx_step_context, scenario=scenario, duration_s=0.5, min_query_count=100)
    part = out.result
    primary, unit, units = PRIMARY[scenario]
    assert part.status == "valid", part.invalid_reasons
    assert part.invalid_reasons == ()
    assert part.benchmark["primary_metric"] == primary
    assert part.benchmark["division"] == "unofficial"
    assert part.metrics[primary].unit == unit and part.metrics[primary].value > 0
    assert part.metrics["latency_p99_ns"].unit == "ns"
    mlperf = part.sections["mlperf"]
    assert mlperf["result_validity"] == "VALID"
    assert mlperf["effective"]["min_duration_ms"] == 500
    assert mlperf["effective"]["qsl_rng_seed"] == 2085463073848966840
    assert mlperf["summary"]["units"] == units
    assert mlperf["loadgen_version"].startswith("6.0.17")
    assert any("600000 ms" in b for b in mlperf["submission_blockers"])
    assert mlperf["derived_settings"], "unset QPS/latency must be calibrated"
    log_dir = Path(out.outputs["log_dir"])
    assert {a.kind for a in out.artifacts} >= {"mlperf_log_detail", "mlperf_log_summary", "user_conf"}
    # loadgen-2, -3...: the harness ran the test again (a Server run that missed its latency
    # bound on a loaded machine is calibrated lower and rerun); each attempt keeps its own logs
    assert re.fullmatch(r"loadgen(-\d+)?", log_dir.name) and (log_dir / "mlperf_log_detail.txt").is_file()
    assert "min_duration = 500" in (log_dir / "user.conf").read_text()


def test_parsed_values_match_loadgen_summary(cmx_home: Path, cmx_step_context: Any) -> None:
    """The detail log (source of truth) and LoadGen's human summary agree."""
    out = _run(cmx_step_context, scenario="Offline", duration_s=0.5, min_query_count=100)
    log_dir = Path(out.outputs["log_dir"])
    log = parse_detail(log_dir / "mlperf_log_detail.txt")
    assert log.get("result_samples_per_second") == pytest.approx(
        _summary_value(log_dir, "Samples per second"), rel=1e-4)
    assert log.latency_ns()["p99"] == _summary_value(log_dir, "99.00 percentile latency (ns)")
    assert log.get("effective_scenario") == "Offline"


def test_single_stream_early_stopping_is_the_result(cmx_home: Path, cmx_step_context: Any) -> None:
    out = _run(cmx_step_context, scenario="SingleStream", duration_s=0.5, min_query_count=100)
    log_dir = Path(out.outputs["log_dir"])
    text = (log_dir / "mlperf_log_summary.txt").read_text()
    estimate = re.search(r"Early stopping 90.0th percentile estimate: (\d+)", text)
    assert estimate and out.result.metrics["early_stopping_latency_ns"].value == int(estimate.group(1))
    assert out.result.sections["mlperf"]["summary"]["result"] == int(estimate.group(1)) / 1e6


def test_token_run_reports_ttft_tpot_and_tokens_per_second(cmx_home: Path, cmx_step_context: Any) -> None:
    out = _run(cmx_step_context, scenario="Server", duration_s=0.5, target_qps=500,
               model_name="llama3.1-8b", sut_params={"tokens_per_sample": 8, "total_sample_count": 64})
    part = out.result
    assert part.benchmark["primary_metric"] == "tokens_per_second"
    assert part.sections["mlperf"]["mlperf_name"] == "llama3_1-8b"  # MLPerf's name: in its own section
    assert "mlperf_name" not in part.benchmark and "availability" not in part.benchmark
    assert part.metrics["tokens_per_second"].unit == "tokens/s"
    assert part.metrics["tokens_per_second"].value > 0
    assert part.metrics["ttft_p99_ns"].value > 0 and part.metrics["tpot_p99_ns"].value is not None
    mlperf = part.sections["mlperf"]
    assert mlperf["effective"]["use_token_latencies"] is True
    assert mlperf["effective"]["ttft_latency_ns"] == 2_000_000_000  # official llama3.1-8b limit
    assert set(mlperf["ttft_ns"]) >= {"p50", "p99", "mean"}
    assert mlperf["summary"]["units"] == "Tokens/s"


def test_too_low_expected_qps_is_invalid_with_loadgen_reasons(cmx_home: Path, cmx_step_context: Any) -> None:
    """The Offline trap: LoadGen finishes early; reported as invalid, not a crash."""
    out = _run(cmx_step_context, scenario="Offline", duration_s=1, expected_qps=100, min_query_count=10)
    part = out.result
    assert part.status == "invalid"
    assert "Min duration satisfied : NO" in part.invalid_reasons
    assert any("Increase expected QPS" in r for r in part.invalid_reasons)
    assert part.sections["mlperf"]["min_duration_met"] is False
    assert "LoadGen verdict is INVALID, not VALID" in part.sections["mlperf"]["submission_blockers"]
    assert out.outputs["status"] == "invalid"


def test_accuracy_mode_logs_every_sample_and_hashes_the_log(cmx_home: Path, cmx_step_context: Any) -> None:
    out = _run(cmx_step_context, scenario="Offline", mode="AccuracyOnly",
               sut_params={"total_sample_count": 50, "performance_sample_count": 20})
    part = out.result
    assert part.status == "valid", part.invalid_reasons
    assert part.benchmark["mode"] == "AccuracyOnly"
    assert part.metrics["accuracy_samples"].value == 50
    assert "samples_per_second" not in part.metrics
    log_dir = Path(out.outputs["log_dir"])
    entries = json.loads((log_dir / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(50))
    digest = hashlib.sha256((log_dir / "mlperf_log_accuracy.json").read_bytes()).hexdigest()
    assert f"hash={digest}" in (log_dir / "accuracy.txt").read_text().splitlines()
    assert part.sections["mlperf"]["submission_blockers"] == []  # duration/counts: performance runs only


def test_find_peak_performance_runs_in_server(cmx_home: Path, cmx_step_context: Any) -> None:
    out = _run(cmx_step_context, scenario="Server", mode="FindPeakPerformance", duration_s=0.3,
               target_qps=2000, min_query_count=50)
    part = out.result
    assert part.benchmark["mode"] == "FindPeakPerformance"
    assert part.sections["mlperf"]["result_validity"] in ("VALID", "INVALID")
    assert any("FindPeakPerformance" in b for b in part.sections["mlperf"]["submission_blockers"])


@pytest.mark.parametrize(("params", "words"), [
    ({"scenario": "Batch"}, "scenario 'Batch' is not known"),
    ({"scenario": "Offline", "mode": "Submission"}, "mode 'Submission' is not known"),
    ({"scenario": "Offline", "mode": "FindPeakPerformance"}, "works only with scenario Server"),
    ({"scenario": "Offline", "sut": "gpu-magic"}, "sut 'gpu-magic' is not known"),
    ({"scenario": "Offline", "duration_s": "soon"}, "duration_s='soon' must be a number"),
    ({}, "scenario is required"),
])
def test_bad_parameters_are_one_line_usage_errors(cmx_step_context: Any, params: dict, words: str) -> None:
    with pytest.raises(UsageError) as err:
        _run(cmx_step_context, **params)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_sut_errors_in_the_child_come_back_as_one_line(cmx_home: Path, cmx_step_context: Any) -> None:
    with pytest.raises(UsageError) as err:
        _run(cmx_step_context, scenario="Offline", sut_params={"total_sample_count": "many"})
    assert "noop SUT" in str(err.value) and "\n" not in str(err.value)


def test_timeout_kills_the_child(cmx_home: Path, cmx_step_context: Any) -> None:
    with pytest.raises(StepFailed) as err:
        _run(cmx_step_context, scenario="SingleStream", duration_s=60, expected_latency_ms=0.01, timeout_s=1)
    assert "ran past 1 s" in str(err.value)


def test_interrupt_kills_the_child_and_keeps_no_result(cmx_home: Path, tmp_path: Path) -> None:
    import _thread
    import threading

    from cmx_core.errors import Interrupted
    from cmx_mlperf.harness.runner import fresh_log_dir, run_child
    from cmx_mlperf.harness.spec import spec_from_params

    spec = spec_from_params({"sut": "noop", "scenario": "SingleStream", "duration_s": 60,
                             "expected_latency_ms": 0.01})
    log_dir = fresh_log_dir(tmp_path)
    timer = threading.Timer(1.5, _thread.interrupt_main)
    timer.start()
    with pytest.raises(Interrupted):
        run_child(spec, log_dir)
    timer.cancel()
    assert (log_dir / "INTERRUPTED").is_file()
    assert not (log_dir / "child_report.json").exists()
    spec_path = str(log_dir / "spec.json")
    assert processes_with(spec_path) == []


def test_each_test_gets_a_fresh_directory(cmx_home: Path, tmp_path: Path) -> None:
    from cmx_mlperf.harness.runner import fresh_log_dir

    (tmp_path / "loadgen").mkdir()
    (tmp_path / "loadgen" / "audit.config").write_text("*.*.mode = 2\n")
    fresh = fresh_log_dir(tmp_path)
    assert fresh.name == "loadgen-2" and list(fresh.iterdir()) == []


def test_parser_skips_noise_and_collects_errors() -> None:
    lines = [
        "not a log line",
        ':::MLLOG {"key": "result_validity", "value": "INVALID", "metadata": {"is_error": false}}',
        ':::MLLOG {"key": "error_runtime", "value": "boom", "metadata": {"is_error": true}}',
        ':::MLLOG {"key": "warning_generic_message", "value": "w", "metadata": {"is_warning": true}}',
        ':::MLLOG {"key": "cut short',
    ]
    log = parse_lines(lines)
    assert log.get("result_validity") == "INVALID"
    assert log.errors == ("error_runtime: boom",)
    assert log.warnings == ("w",)


def test_a_log_without_a_verdict_is_a_failed_run(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text(':::MLLOG {"key": "loadgen_version", "value": "6.0.17"}\n')
    with pytest.raises(CmxError, match="did not finish the test"):
        parse_detail(path)


def test_the_step_reports_its_numbers_on_the_application_channel(cmx_home: Path, cmx_step_context: Any) -> None:
    from dataclasses import replace

    from cmx_core.testing.telemetry import AppSeries, StepMetrics

    series = AppSeries()
    ctx = cmx_step_context(params={"sut": "noop", "scenario": "Server", "duration_s": 0.5, "target_qps": 500,
                                   "model_name": "llama3.1-8b",
                                   "sut_params": {"tokens_per_sample": 8, "total_sample_count": 64}})
    ctx = replace(ctx, metrics=StepMetrics(series, "n/loadgen", ctx.log_dir / "app_metrics.txt"))
    part = run_step(ctx).result
    reported = {v.name: (v.value, v.kind) for v in series.snapshot()}
    assert reported["completed_queries"] == (float(part.sections["mlperf"]["query_count"]), "counter")
    assert reported["tokens_per_second"] == (part.metrics["tokens_per_second"].value, "gauge")
    assert reported["completed_samples_per_second"][0] == part.metrics["completed_samples_per_second"].value
    assert reported["loadgen_attempts"] == (1.0, "gauge")
