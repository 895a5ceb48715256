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
