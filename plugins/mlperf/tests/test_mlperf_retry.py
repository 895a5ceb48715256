"""A performance run that ends before its minimum duration because the calibration set its
expected QPS (or latency) wrong is run again with a corrected value, each attempt recorded;
a value the user set is never changed. The logs are real LoadGen logs of early-ending runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from cmx_mlperf.harness import retry
from cmx_mlperf.harness.mllog import parse_detail
from cmx_mlperf.harness.runner import fresh_log_dir, run_child
from cmx_mlperf.harness.spec import LoadgenSpec
from cmx_mlperf.harness.step import run_step


def _early(tmp_path: Path, **settings: Any) -> tuple[LoadgenSpec, Any, dict[str, Any]]:
    """A real run whose user-set expected value is far off, so it ends early."""
    spec = LoadgenSpec(sut="noop", duration_s=1, min_query_count=10, **settings)
    child = run_child(spec, fresh_log_dir(tmp_path))
    log = parse_detail(child.log_dir / "mlperf_log_detail.txt")
    assert retry.ended_too_early(log), log.get("result_validity")
    return spec, log, child.report


def test_offline_expected_qps_is_raised_from_what_the_run_measured(cmx_home: Path, tmp_path: Path) -> None:
    spec, log, report = _early(tmp_path, scenario="Offline", expected_qps=100)
    calibrated = dataclasses.replace(spec, expected_qps=None)  # as if the calibration had said 100
    following = retry.next_spec(calibrated, spec, log, report)
    assert following is not None and following.scenario == "Offline"
    measured = float(log.get("result_samples_per_second"))
    assert following.expected_qps == float(f"{retry.RAISE * max(100.0, measured):.4g}")
    assert following.expected_qps > 100


def test_single_stream_expected_latency_is_lowered_below_the_measured_median(cmx_home: Path,
                                                                             tmp_path: Path) -> None:
    spec, log, report = _early(tmp_path, scenario="SingleStream", expected_latency_ms=1000)
    following = retry.next_spec(dataclasses.replace(spec, expected_latency_ms=None), spec, log, report)
    assert following is not None
    median_ms = log.get("result_50.00_percentile_latency_ns") / 1e6
    assert following.expected_latency_ms is not None
    assert following.expected_latency_ms <= max(0.001, min(1000, median_ms) / retry.RAISE) * 1.001


def test_a_value_the_user_set_is_never_changed(cmx_home: Path, tmp_path: Path, cmx_step_context: Any) -> None:
    spec, log, report = _early(tmp_path, scenario="Offline", expected_qps=100)
    assert retry.next_spec(spec, spec, log, report) is None  # the user asked for 100
    out = run_step(cmx_step_context(params={"sut": "noop", "scenario": "Offline", "duration_s": 1,
                                            "expected_qps": 100, "min_query_count": 10}))
    assert out.result.status == "invalid" and "attempts" not in out.result.sections["mlperf"]


def test_a_calibrated_run_records_its_attempts_and_ends_valid(cmx_home: Path, cmx_step_context: Any) -> None:
    out = run_step(cmx_step_context(params={"sut": "noop", "scenario": "Offline", "duration_s": 1,
                                            "min_query_count": 10}))
    mlperf = out.result.sections["mlperf"]
    attempts = mlperf.get("attempts", [{"result_validity": mlperf["result_validity"]}])
    assert attempts[-1]["result_validity"] == "VALID" and out.result.status == "valid"
    assert len(attempts) <= retry.MAX_ATTEMPTS
    json.dumps(attempts)  # recorded as plain data


def test_a_server_run_that_misses_its_latency_bound_is_run_again_at_a_lower_qps(cmx_home: Path,
                                                                               tmp_path: Path) -> None:
    """A real Server run whose TTFT limit (1 ns) no SUT meets: LoadGen says INVALID for
    latency; with a calibrated QPS the next attempt asks for half of it."""
    spec = LoadgenSpec(sut="noop", scenario="Server", duration_s=1, min_query_count=50, target_qps=200,
                       ttft_ms=1e-6, model_name="llama3.1-8b", sut_params={"tokens_per_sample": 3})
    child = run_child(spec, fresh_log_dir(tmp_path))
    log = parse_detail(child.log_dir / "mlperf_log_detail.txt")
    assert retry.missed_latency(log) and not retry.ended_too_early(log)
    following = retry.next_spec(dataclasses.replace(spec, target_qps=None), spec, log, child.report)
    assert following is not None and following.target_qps == 200 / retry.RAISE
    assert retry.next_spec(spec, spec, log, child.report) is None  # the user asked for 200


def test_the_calibration_probe_never_plans_a_batch_beyond_its_budget() -> None:
    from cmx_mlperf.harness.calibrate import GROWTH, next_batch

    assert next_batch(1, best_sps=1000.0, remaining_s=1.0) == GROWTH  # room: grow
    assert next_batch(16, best_sps=40.0, remaining_s=0.5) == 20  # 64 would take 1.6 s: bounded to what fits
    assert next_batch(16, best_sps=20.0, remaining_s=0.5) is None  # not even 16 fits: stop probing
    assert next_batch(4, best_sps=1e9, remaining_s=0.0) is None  # budget spent


def test_server_qps_follows_a_batching_sut_capacity_and_accuracy_runs_are_calibrated() -> None:
    from cmx_mlperf.harness.calibrate import ACCURACY_FACTOR, SERVER_FACTOR, Calibration, derive
    from cmx_mlperf.harness.config import needs_calibration

    one_at_a_time = Calibration("Server", 10, 1.0, throughput_sps=11.0, median_query_latency_ms=100.0)
    batching = Calibration("Server", 10, 1.0, throughput_sps=400.0, median_query_latency_ms=100.0)
    assert derive(one_at_a_time, 10).target_qps == SERVER_FACTOR * 11.0
    assert derive(batching, 10).target_qps == SERVER_FACTOR * 400.0  # not 0.5 / 100 ms = 5
    accuracy = dataclasses.replace(batching, mode="AccuracyOnly")
    assert derive(accuracy, 10).target_qps == ACCURACY_FACTOR * 400.0
    server_accuracy = LoadgenSpec(sut="noop", scenario="Server", mode="AccuracyOnly")
    assert needs_calibration(server_accuracy)  # not LoadGen's 1 QPS default
    assert not needs_calibration(dataclasses.replace(server_accuracy, target_qps=5.0))
    assert not needs_calibration(dataclasses.replace(server_accuracy, scenario="Offline"))


def test_a_server_accuracy_run_issues_at_the_calibrated_qps(cmx_home: Path, cmx_step_context: Any) -> None:
    """300 samples at LoadGen's default of 1 QPS would take 5 minutes; the child's time limit
    of 120 s fails the step unless the accuracy run is calibrated."""
    out = run_step(cmx_step_context(params={"sut": "noop", "scenario": "Server", "mode": "AccuracyOnly",
                                            "sut_params": {"total_sample_count": 300}, "timeout_s": 120}))
    mlperf = out.result.sections["mlperf"]
    assert out.result.status == "valid", out.result.invalid_reasons
    assert mlperf["calibration"]["mode"] == "AccuracyOnly"
    assert mlperf["derived_settings"]["target_qps"] > 10
    assert mlperf["accuracy"]["samples"] == 300


def test_a_retried_run_keeps_what_the_first_attempt_calibrated(cmx_home: Path, cmx_step_context: Any) -> None:
    """Every attempt after the first asks for a value derived from the first one's calibration
    and calibrates nothing itself; the result still says what the calibration found (CI saw a
    busy machine's Server run retried and its derived settings lost)."""
    out = run_step(cmx_step_context(params={
        "sut": "noop", "scenario": "Server", "duration_s": 1, "min_query_count": 50, "ttft_ms": 1e-6,
        "model_name": "llama3.1-8b", "sut_params": {"tokens_per_sample": 3}}))
    mlperf = out.result.sections["mlperf"]
    attempts = mlperf["attempts"]
    assert len(attempts) > 1 and attempts[0]["target_qps"] is None  # the first one was calibrated
    derived = mlperf["derived_settings"]
    assert derived and derived["target_qps"] > 0
    assert attempts[1]["target_qps"] == float(f"{derived['target_qps'] / retry.RAISE:.4g}")


def test_with_calibration_keeps_a_report_that_calibrated_itself() -> None:
    own = {"derived": {"target_qps": 5.0}}
    assert retry.with_calibration(own, {"target_qps": 9.0}) is own
    assert retry.with_calibration({}, {"target_qps": 9.0}) == {"derived": {"target_qps": 9.0}}
    assert retry.with_calibration({}, None) == {}
