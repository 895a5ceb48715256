"""Real PeakQPS searches: the tiny Llama in-process on the CPU through the llama recipe, and
the same model behind the loopback OpenAI-compatible server through the openai-http SUT.
Every point is a real LoadGen Server test in its own child process. The assertions are about
the structure the search guarantees, never about this machine's speed."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cmx_core import api
from cmx_core.testing.telemetry import read_series
from cmx_mlperf import plugin
from cmx_mlperf.harness.peak import REUSE, SWEEP_TOP, Point, Verdict, sweep_targets
from cmx_mlperf.harness.peak_step import BLOCKER
from cmx_mlperf.harness.step import run_step
from cmx_mlperf.llm.test_server import LoopbackServer

BOUNDING = ("latency", "sut_errors", "unconfirmed")


def _check_search(section: dict[str, Any], search_runs: int, sweep_points: int) -> None:
    """What every search guarantees, whatever the machine's speed."""
    points, peak = section["points"], section["peak_qps"]
    searched = [p for p in points if p["phase"] == "search"]
    assert len(searched) == section["runs"] <= search_runs
    assert peak is not None, section["stopped"]
    valid = [p["target_qps"] for p in searched if p["verdict"] == "valid"]
    assert peak == max(valid)  # the peak is the highest VALID point of the search
    above = [p for p in searched if p["target_qps"] > peak]
    assert all(p["verdict"] in (*BOUNDING, "queries") for p in above)  # never a VALID one
    for p in points:
        assert p["verdict"] == "valid" or p["result_validity"] != "VALID" or p["verdict"] == "sut_errors"
        assert p["verdict"] != "valid" or p["reasons"] == []
        assert p["verdict"] == "valid" or p["reasons"]  # every INVALID point says why
    bounds = [p["target_qps"] for p in above if p["verdict"] in BOUNDING]
    if section["converged"]:
        assert bounds and min(bounds) <= peak * (1 + section["tolerance"])
    else:
        assert section["stopped"] == f"search_runs {search_runs} spent"
    curve = [c["target_qps"] for c in section["curve"]]
    assert curve == sorted(curve) and len(curve) == len(points)
    if sweep_points:
        assert max(curve) >= SWEEP_TOP * peak * (1 - REUSE)  # the sweep reaches 1.2x the peak
        # the sweep ran exactly the targets the search had not measured yet (within REUSE): on a
        # loaded machine the search may already have measured all of them, and then none runs
        planned = sweep_targets([Point(p["target_qps"], Verdict(p["verdict"]), None) for p in searched], peak,
                                sweep_points) if searched[-1]["verdict"] != "failed" else []
        swept = [p["target_qps"] for p in points if p["phase"] == "sweep"]
        failed = any(p["verdict"] == "failed" for p in points if p["phase"] == "sweep")
        assert swept == planned or (failed and swept == planned[:len(swept)])
        assert section["sweep_runs"] == len(swept) <= sweep_points
    assert {c["result_validity"] for c in section["curve"]} <= {"VALID", "INVALID"}
    # a point whose SUT reported errors (a loaded machine's timeouts) keeps its TTFT/TPOT keys
    # with null values, measured but not trustworthy; every other point has them
    for c in section["curve"]:
        assert c["tokens_per_second"] > 0, c
        if c["verdict"] == Verdict.SUT_ERRORS.value:
            assert c["ttft_p99_ns"] is None and c["tpot_p99_ns"] is None, c
        else:
            assert c["ttft_p99_ns"] > 0, c


def _validate(mlperf: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(json.loads(plugin.SECTION_SCHEMA.read_text())).validate(mlperf)


@pytest.mark.slow
def test_peak_search_of_the_cpu_tiny_llama_through_the_recipe(cmx_home: Path) -> None:
    # 3 search runs and 1 sweep point: enough for a bound above a valid point (or a spent budget)
    # and a sweep past the peak; every run is a CPU-bound LoadGen test in its own child
    inputs = {"mode": "PeakQPS", "duration_s": 2, "search_runs": 3, "sweep_points": 1, "max_new_tokens": 8,
              "timeout_s": 300}
    outcome = api.run("mlperf,inference,llama", inputs)
    doc = outcome.document
    assert doc["status"] == "valid", doc["invalid_reasons"]
    assert doc["benchmark"]["mode"] == "PeakQPS" and doc["benchmark"]["scenario"] == "Server"
    section = doc["mlperf"]["peak_search"]
    _check_search(section, search_runs=3, sweep_points=1)
    assert doc["metrics"]["peak_qps"] == {"value": section["peak_qps"], "unit": "queries/s", "higher_is_better": True}
    assert BLOCKER in doc["mlperf"]["submission_blockers"]
    peak = next(p for p in section["points"] if p["log_dir"] == section["peak_log_dir"])
    assert doc["mlperf"]["log_dir"] == peak["log_dir"]  # the result is the peak point's run
    assert doc["metrics"]["tokens_per_second"]["value"] == peak["tokens_per_second"]
    kinds = {a["kind"]: a for a in doc["artifacts"]}
    assert {"peak_curve_csv", "mlperf_log_detail"} <= set(kinds)
    rows = list(csv.DictReader((outcome.run_dir / kinds["peak_curve_csv"]["path"]).open()))
    assert [float(r["target_qps"]) for r in rows] == [c["target_qps"] for c in section["curve"]]
    for point in section["points"]:  # each point ran in its own child with its own logs
        assert (outcome.run_dir / point["log_dir"] / "mlperf_log_detail.txt").is_file()
    assert len({p["log_dir"] for p in section["points"]}) == len(section["points"])
    _validate(doc["mlperf"])
    series = {name for name, *_ in read_series(outcome.run_dir / "telemetry.om")}  # each trial's live progress
    assert {"cmx_app_completed_samples_total", "cmx_app_live_tokens_per_second"} <= series


@pytest.mark.slow
def test_peak_search_against_an_openai_compatible_endpoint(
    server: LoopbackServer, cmx_home: Path, cmx_step_context: Any
) -> None:
    params = {"sut": "openai-http", "sut_params": {"base_url": server.url, "max_tokens": 6, "concurrency": 16},
              "scenario": "Server", "mode": "PeakQPS", "model_name": "llama3.1-8b", "duration_s": 2,
              "min_query_count": 460, "timeout_s": 300, "search_runs": 3, "sweep_points": 1}
    out = run_step(cmx_step_context(params=params))
    part = out.result
    assert part.status == "valid", part.invalid_reasons
    mlperf = part.sections["mlperf"]
    assert mlperf["sut"] == "openai-http" and part.benchmark["mode"] == "PeakQPS"
    _check_search(mlperf["peak_search"], search_runs=3, sweep_points=1)
    assert out.outputs["peak_qps"] == part.metrics["peak_qps"].value == mlperf["peak_search"]["peak_qps"]
    assert any(a.kind == "peak_curve_csv" and a.path.is_file() for a in out.artifacts)
    _validate(mlperf)
