"""The run summary and ``cmx results show`` report values honestly: each in its own unit with
thousands separators, a null metric as "not measured (why)", every reason in full."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cmx_core.results.numbers import fmt_number
from cmx_core.results.summary import run_summary

BLOCKERS = ["the run lasted 12 s, below the scenario's 600 s minimum duration (min_duration_ms=600000)",
            "the accuracy run is missing: run with --mode=AccuracyOnly and give its log"]


def _doc(metrics: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"status": "invalid", "run_id": "0123456789abcdef", "benchmark": {"task": "t", "scenario": "Offline"},
            "software": {"recipe": {"name": "r"}}, "timing": {"wall_s": 12.5}, "metrics": metrics,
            "invalid_reasons": ["INVALID: min duration not met"], **extra}


@pytest.mark.parametrize(("value", "text"), [
    (7.31, "7.31"), (200000.0, "200,000.0"), (3505912, "3,505,912"), (1234.5678, "1,234.6"),
    (0.000123, "0.000123"), (None, "-"), (0.0, "0"),
])
def test_numbers(value: float | None, text: str) -> None:
    assert fmt_number(value) == text


def test_summary_keeps_units_names_and_reasons() -> None:
    text = run_summary(_doc({
        "per_loop_ns": {"value": 7.31, "unit": "ns", "higher_is_better": False},
        "items": {"value": 200000.0, "unit": "items", "higher_is_better": True},
        "ttft_p99_ns": {"value": None, "unit": "ns", "higher_is_better": False},
    }, mlperf={"submission_blockers": BLOCKERS}), "/runs/x/result.json")
    assert max(len(line) for line in text.splitlines()) <= 80  # reasons wrap at their spaces
    whole = run_summary(_doc({"ttft_p99_ns": {"value": None, "unit": "ns", "higher_is_better": False}},
                             mlperf={"submission_blockers": BLOCKERS}), "/runs/x/result.json", None)
    assert any(len(line) > 80 for line in whole.splitlines())  # --wide: one line each
    text = " ".join(text.split())  # the wrapped lines joined back
    assert "per_loop_ns" in text and "7.31 ns" in text and " ms" not in text
    assert "200,000.0 items" in text and "e+05" not in text
    assert "ttft_p99_ns" in text and "not measured (the Offline scenario has no per-query latency" in text
    assert "null" not in text
    assert "not submittable (2 reasons):" in text
    for reason in BLOCKERS:
        assert f"- {' '.join(reason.split())}" in " ".join(text.split())
    assert "invalid: INVALID: min duration not met" in text


def test_null_outside_offline_says_nothing_was_recorded() -> None:
    doc = _doc({"score": {"value": None, "unit": "points", "higher_is_better": True}})
    doc["benchmark"]["scenario"] = None
    assert "not measured (the run recorded no value for it)" in run_summary(doc, "p")


def test_results_show_lists_reasons_and_null_metrics(cli: Callable[..., Any], recipes: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    recipes("plain", """
        name: plain
        tags: [plain]
        summary: one step
        cache: false
        steps:
          - {uses: shell, with: {cmd: ["true"]}}
    """)
    result = cli("run", "--recipes", str(recipes.dir), "--tags=plain", "--json")
    assert result.code == 0, result.err
    from cmx_core.cli.results_cmd import _show, _store

    stored = _store().get(json.loads(result.out)["run_id"])
    doc = dict(stored.document, invalid_reasons=["INVALID: min duration not met"],
               mlperf={"submission_blockers": BLOCKERS},
               metrics={"ttft_p99_ns": {"value": None, "unit": "ns", "higher_is_better": False}})
    doc["benchmark"] = dict(doc["benchmark"], scenario="Offline")
    capsys.readouterr()
    _show(doc, stored.path)
    out = " ".join(capsys.readouterr().out.split())
    for reason in BLOCKERS:
        assert reason in out
    assert "INVALID: min duration not met" in out and "not measured" in out
