"""SUT errors reach the result: the harness child reads the SUT's optional ``errors()`` after
the LoadGen test; the step keeps LoadGen's metrics, its status becomes ``error`` (``invalid``
when LoadGen said INVALID), the reasons land in ``invalid_reasons``, the failed-sample count
in ``mlperf.failed_samples``, and TTFT/TPOT become null.

The fault runs go through the real harness (child process, LoadGen) against the loopback
server serving the tiny Llama, with each of its fault modes."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import StepFailed
from cmx_core.testing import result_part_problems
from cmx_mlperf.harness.child import sut_errors
from cmx_mlperf.harness.mllog import DetailLog, parse_detail
from cmx_mlperf.harness.result import build_part
from cmx_mlperf.harness.spec import spec_from_params
from cmx_mlperf.harness.step import run_step
from cmx_mlperf.llm.test_server import Fault, LoopbackServer
from cmx_mlperf.sut import ReportsErrors


def _token_metrics(part: Any) -> dict[str, Any]:
    return {k: m.value for k, m in part.metrics.items() if k.startswith(("ttft_", "tpot_"))}


def _server_params(url: str, **sut: Any) -> dict[str, Any]:
    return {"sut": "openai-http", "sut_params": {"base_url": url, "max_tokens": 6, "concurrency": 4, **sut},
            "scenario": "Server", "model_name": "llama3.1-8b", "duration_s": 1, "target_qps": 20,
            "min_query_count": 1, "timeout_s": 300}


@pytest.mark.parametrize(("mode", "reason"), [
    ("http500", "HTTP 500"),
    ("bad-json", "malformed JSON chunk"),
    ("drop", "stream dropped before [DONE]"),
])
def test_fault_modes_end_as_error_results_with_reasons(
    faulty: LoopbackServer, cmx_home: Path, cmx_step_context: Any, mode: str, reason: str
) -> None:
    faulty.set_fault(Fault(mode, every=2))
    out = run_step(cmx_step_context(params=_server_params(faulty.url)))  # completes, no exception
    part = out.result
    mlperf = part.sections["mlperf"]
    assert part.status == ("invalid" if mlperf["result_validity"] == "INVALID" else "error")
    assert out.outputs["status"] == part.status
    assert len(set(part.invalid_reasons)) == len(part.invalid_reasons)  # repeated lines counted
    lines = [r for r in part.invalid_reasons if r.startswith("sut openai-http: ")]
    assert len(lines) == 1 and lines[0].endswith(f"samples: {reason}"), part.invalid_reasons
    failed, total = map(int, re.search(r"(\d+) of (\d+) samples", lines[0]).groups())  # type: ignore[union-attr]
    assert mlperf["failed_samples"] == failed and 0 < failed < total
    assert mlperf["sut_errors"] == [lines[0].removeprefix("sut openai-http: ")]
    assert "the SUT reported failed samples" in mlperf["submission_blockers"]
    tokens = _token_metrics(part)
    assert {"ttft_p99_ns", "tpot_p99_ns", "ttft_mean_ns", "tpot_mean_ns"} <= set(tokens)  # keys kept
    assert set(tokens.values()) == {None}
    assert set(mlperf["ttft_ns"].values()) == {None} and set(mlperf["tpot_ns"].values()) == {None}
    assert part.metrics["tokens_per_second"].value > 0  # LoadGen's throughput is kept
    assert part.metrics["latency_p99_ns"].value > 0
    assert result_part_problems("mlperf.loadgen", out) == []  # a schema-valid result document


def test_a_clean_server_run_keeps_token_latencies(
    server: LoopbackServer, cmx_home: Path, cmx_step_context: Any
) -> None:
    out = run_step(cmx_step_context(params=_server_params(server.url)))
    part = out.result
    mlperf = part.sections["mlperf"]
    assert mlperf["sut_errors"] == [] and mlperf["failed_samples"] == 0
    assert part.status == ("valid" if mlperf["result_validity"] == "VALID" else "invalid")
    assert not any(r.startswith("sut ") for r in part.invalid_reasons)
    assert part.metrics["ttft_p99_ns"].value > 0 and part.metrics["tpot_p99_ns"].value > 0


def test_fail_on_errors_still_fails_the_step(
    faulty: LoopbackServer, cmx_home: Path, cmx_step_context: Any
) -> None:
    faulty.set_fault(Fault("http500", every=2))
    params = _server_params(faulty.url, fail_on_errors=True)
    with pytest.raises(StepFailed, match=r"samples failed: \d+ of \d+ samples: HTTP 500"):
        run_step(cmx_step_context(params=params))


# -- the status rule on a real token log, LoadGen's verdict set either way -------------------


@pytest.fixture(scope="module")
def token_log(tmp_path_factory: Any) -> tuple[DetailLog, dict[str, Any]]:
    """A real LoadGen token run (no-op SUT, Server, 0.3 s) and its child report."""
    from cmx_core.testing import make_step_context

    base = tmp_path_factory.mktemp("token-run")
    params = {"sut": "noop", "scenario": "Server", "duration_s": 0.3, "target_qps": 500,
              "model_name": "llama3.1-8b", "sut_params": {"tokens_per_sample": 8, "total_sample_count": 64}}
    out = run_step(make_step_context(base, params=params))
    log_dir = Path(out.outputs["log_dir"])
    report = json.loads((log_dir / "child_report.json").read_text())
    return parse_detail(log_dir / "mlperf_log_detail.txt"), report


def _with_validity(log: DetailLog, validity: str) -> DetailLog:
    return replace(log, values={**log.values, "result_validity": validity})


@pytest.mark.parametrize(("validity", "status"), [("VALID", "error"), ("INVALID", "invalid")])
def test_sut_errors_set_the_status_and_null_token_latencies(
    token_log: tuple[DetailLog, dict[str, Any]], validity: str, status: str
) -> None:
    log, report = token_log
    assert "sut_errors" not in report  # the no-op SUT reports no errors
    spec = spec_from_params({"sut": "noop", "scenario": "Server", "model_name": "llama3.1-8b"})
    clean = build_part(_with_validity(log, validity), spec, report, "loadgen")
    assert clean.status == ("valid" if validity == "VALID" else "invalid")
    assert clean.metrics["ttft_p99_ns"].value is not None
    assert clean.sections["mlperf"]["failed_samples"] is None and clean.sections["mlperf"]["sut_errors"] == []

    failing = {**report, "sut_errors": ["2 of 9 samples: HTTP 500"], "failed_samples": 2}
    part = build_part(_with_validity(log, validity), spec, failing, "loadgen")
    assert part.status == status
    assert part.invalid_reasons[-1] == "sut noop: 2 of 9 samples: HTTP 500"
    assert part.sections["mlperf"]["failed_samples"] == 2
    assert set(_token_metrics(part)) == set(_token_metrics(clean))
    assert set(_token_metrics(part).values()) == {None}
    assert part.metrics["tokens_per_second"].value == clean.metrics["tokens_per_second"].value


def test_repeated_loadgen_errors_are_counted_once(token_log: tuple[DetailLog, dict[str, Any]]) -> None:
    log, report = token_log
    zero = "error_runtime: n_tokens argument missing or attempted to record 0 as number of tokens"
    failing = replace(log, values={**log.values, "result_validity": "INVALID"},
                      errors=(zero, zero, "error_runtime: other", zero))
    spec = spec_from_params({"sut": "noop", "scenario": "Server", "model_name": "llama3.1-8b"})
    part = build_part(failing, spec, report, "loadgen")
    assert [r for r in part.invalid_reasons if r.startswith("error_runtime")] == [
        f"{zero} (logged 3 times)", "error_runtime: other"]
    assert part.sections["mlperf"]["errors"] == list(failing.errors)  # the section keeps every line


def test_accuracy_runs_with_sut_errors_are_errors(token_log: tuple[DetailLog, dict[str, Any]]) -> None:
    log, report = token_log
    spec = spec_from_params({"sut": "noop", "scenario": "Offline", "mode": "AccuracyOnly"})
    failing = {**report, "accuracy": {"samples": 64.0}, "sut_errors": ["1 of 64 samples: x"], "failed_samples": 1}
    part = build_part(log, spec, failing, "loadgen")
    assert part.status == "error" and "sut noop: 1 of 64 samples: x" in part.invalid_reasons


# -- the child's reading of the optional contract ----------------------------------------------


class _Reporting:
    name = "reporting"

    def __init__(self, reasons: Any, count: Any = None) -> None:
        self._reasons = reasons
        if count is not None:
            self.error_count = count

    def errors(self) -> Any:
        return self._reasons


def test_child_reads_errors_only_from_suts_that_report_them() -> None:
    from cmx_mlperf.suts.noop import NoopSUT

    assert sut_errors(NoopSUT(8, 8)) == {}
    assert not isinstance(NoopSUT(8, 8), ReportsErrors)
    assert isinstance(_Reporting([]), ReportsErrors)
    assert sut_errors(_Reporting([])) == {"sut_errors": [], "failed_samples": None}
    assert sut_errors(_Reporting(["3 of 4 samples:\n  HTTP 500", ""], 3)) == {
        "sut_errors": ["3 of 4 samples: HTTP 500"], "failed_samples": 3}
    with pytest.raises(StepFailed, match="sut reporting: errors\\(\\) returned str"):
        sut_errors(_Reporting("HTTP 500"))
