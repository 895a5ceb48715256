"""Before each LoadGen test the step says how long LoadGen will at least run it (#18 item 9):
``duration_s`` when set, else the embedded mlperf.conf's 600 s; an accuracy pass has no
fixed length and says so. Shown on stderr as a ``cmx: ...`` progress line."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from cmx_mlperf.harness.spec import LoadgenSpec
from cmx_mlperf.harness.step import expected_duration_line, run_step


def test_the_line_names_the_duration_and_where_it_comes_from() -> None:
    assert expected_duration_line(LoadgenSpec(sut="noop", scenario="Offline", duration_s=10), 1) == \
        "mlperf.loadgen: Offline PerformanceOnly test: expected to run at least 10 s (duration_s)"
    assert expected_duration_line(LoadgenSpec(sut="noop", scenario="Server"), 2) == \
        "mlperf.loadgen: Server PerformanceOnly test (attempt 2): expected to run at least 600 s " \
        "(mlperf.conf's min_duration)"
    accuracy = expected_duration_line(LoadgenSpec(sut="noop", scenario="Offline", mode="AccuracyOnly"), 1)
    assert "one pass over the accuracy samples" in accuracy and "at least" not in accuracy


def test_a_run_logs_the_expected_duration_before_loadgen_starts(
        cmx_home: Any, cmx_step_context: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cmx.step")
    out = run_step(cmx_step_context(params={"sut": "noop", "scenario": "Offline", "duration_s": 0.3,
                                            "min_query_count": 50}))
    assert out.outputs["status"] in ("valid", "invalid")
    lines = [r.getMessage() for r in caplog.records if r.name == "cmx.step"]
    assert lines[0] == "mlperf.loadgen: Offline PerformanceOnly test: expected to run at least 0.3 s (duration_s)"


def test_each_sut_names_the_extras_it_imports() -> None:
    """The plan checks these (``StepType.extras_for``): a missing ``[llm]`` is named before the run."""
    from cmx_mlperf.sut import SUT_FACTORIES, sut_extras

    assert sut_extras({"sut": "hf-llm"}) == ("llm",) and sut_extras({"sut": "openai-http"}) == ("llm",)
    assert sut_extras({"sut": "noop"}) == () and sut_extras({"sut": "{{ inputs.sut }}"}) == ()
    assert set(SUT_FACTORIES) >= {"classifier", "hf-llm", "openai-http"}
