"""The headline number (primary metric and summary Result) equals what the official v6.1
submission checker's PerformanceCheck reads from the same mlperf_log_detail.txt.

The checker is not on the package index and is not copied: its rule is written here from its
documented behaviour (``get_performance_metric_check``): the result is the scenario's field
(Offline ``result_samples_per_second``, Server ``result_completed_samples_per_sec``,
SingleStream ``early_stopping_latency_ss``, MultiStream ``early_stopping_latency_ms``) unless
the benchmark overrides it (LLMs: tokens/s in Offline/Server; llama3.1-8b-edge SingleStream:
``result_90.00_percentile_latency_ns``); SingleStream/MultiStream values are divided by 1e6
(ns -> ms). Real LoadGen runs with the noop SUT produce the logs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx_mlperf.harness.step import run_step

_SCENARIO_FIELD = {"Offline": "result_samples_per_second", "Server": "result_completed_samples_per_sec",
                   "SingleStream": "early_stopping_latency_ss", "MultiStream": "early_stopping_latency_ms"}
_LLM_TOKENS = {"Offline": "result_tokens_per_second", "Server": "result_completed_tokens_per_second"}
_OVERWRITE = {"llama3.1-8b": _LLM_TOKENS, "llama2-70b-99": _LLM_TOKENS, "llama2-70b-99.9": _LLM_TOKENS,
              "mixtral-8x7b": _LLM_TOKENS, "llama3.1-405b": _LLM_TOKENS, "deepseek-r1": _LLM_TOKENS,
              "gpt-oss-120b": _LLM_TOKENS,
              "llama3.1-8b-edge": {"Offline": "result_tokens_per_second",
                                   "SingleStream": "result_90.00_percentile_latency_ns"}}


def checker_performance_metric(detail: Path, benchmark: str, scenario: str) -> float:
    """The checker's ``performance_metric`` for ``benchmark`` (its own name) in ``scenario``."""
    values: dict[str, Any] = {}
    for line in detail.read_text().splitlines():
        if line.startswith(":::MLLOG"):
            record = json.loads(line[len(":::MLLOG"):])
            values[record["key"]] = record["value"]
    key = _OVERWRITE.get(benchmark, {}).get(scenario, _SCENARIO_FIELD[scenario])
    result = float(values[key])
    return result / 1e6 if scenario in ("SingleStream", "MultiStream") else result


CASES = [  # cmx model_name, checker benchmark, scenario, tokens per sample (0: no token latencies)
    ("resnet50", "resnet", "Offline", 0),
    ("resnet50", "resnet", "Server", 0),
    ("resnet50", "resnet", "SingleStream", 0),
    ("resnet50", "resnet", "MultiStream", 0),
    ("llama3.1-8b", "llama3.1-8b", "Offline", 8),
    ("llama3.1-8b", "llama3.1-8b", "Server", 8),
    ("llama3.1-8b-edge", "llama3.1-8b-edge", "SingleStream", 8),
    ("llama3.1-8b-edge", "llama3.1-8b-edge", "Offline", 8),
    ("llama2-70b", "llama2-70b-99", "Server", 8),
]


@pytest.mark.parametrize(("model", "benchmark", "scenario", "tokens"), CASES)
def test_primary_metric_is_the_checkers(cmx_home: Path, cmx_step_context: Any, model: str, benchmark: str,
                                        scenario: str, tokens: int) -> None:
    params: dict[str, Any] = {"sut": "noop", "scenario": scenario, "model_name": model, "duration_s": 0.5,
                              "min_query_count": 64,
                              "sut_params": {"tokens_per_sample": tokens, "total_sample_count": 64}}
    if scenario == "Server":
        params["target_qps"] = 500
    out = run_step(cmx_step_context(params=params))
    part = out.result
    detail = Path(out.outputs["log_dir"]) / "mlperf_log_detail.txt"
    expected = checker_performance_metric(detail, benchmark, scenario)
    primary = part.metrics[part.benchmark["primary_metric"]].value
    summary = part.sections["mlperf"]["summary"]
    if scenario in ("SingleStream", "MultiStream"):
        assert primary / 1e6 == pytest.approx(expected, rel=1e-12)
        assert summary["units"] == "Latency (ms)"
    else:
        assert primary == pytest.approx(expected, rel=1e-12)
    assert summary["result"] == pytest.approx(expected, rel=1e-12)


def test_edge_llama_single_stream_is_p90_not_first_token(cmx_home: Path, cmx_step_context: Any) -> None:
    """With token latencies on, LoadGen's early-stopping estimate is the first-token one;
    the checker's (and cmx's) result is the p90 query latency."""
    params = {"sut": "noop", "scenario": "SingleStream", "model_name": "llama3.1-8b-edge", "duration_s": 0.5,
              "min_query_count": 64, "sut_params": {"tokens_per_sample": 8, "total_sample_count": 64}}
    part = run_step(cmx_step_context(params=params)).result
    assert part.benchmark["primary_metric"] == "latency_p90_ns"
    summary = part.sections["mlperf"]["summary"]
    assert summary["metric_key"] == "result_90.00_percentile_latency_ns"
    assert summary["result"] == part.metrics["latency_p90_ns"].value / 1e6
    assert "early_stopping_latency_ns" in part.metrics  # LoadGen's estimate is still recorded
