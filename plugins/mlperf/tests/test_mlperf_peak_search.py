"""The PeakQPS search logic with scripted verdicts (no LoadGen): bracketing, bisection,
tolerance, budget, the verdict classes, reruns for too few queries, the sweep to 1.2x the
peak with reuse of measured points; the classification of real LoadGen detail-log values;
the curve files and the result section."""

from __future__ import annotations

import csv
import importlib.util
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from cmx_core.api import Metric, ResultPart
from cmx_mlperf import plugin
from cmx_mlperf.harness import curve
from cmx_mlperf.harness import peak as pk
from cmx_mlperf.harness.mllog import DetailLog
from cmx_mlperf.harness.peak import Point, Search, Trial, Verdict, bracket, classify, search, sweep_targets
from cmx_mlperf.harness.peak_step import BLOCKER, peak_part, search_section

CALIBRATED = 10.0


class Scripted:
    """A SUT whose verdict depends only on the QPS: VALID up to ``limit``, then ``above``;
    ``queries_until`` makes runs below that many queries INVALID for too few queries."""

    def __init__(self, limit: float, above: Verdict = Verdict.LATENCY, queries_until: int = 0,
                 fail_at: float | None = None, needed: int | None = None) -> None:
        self.limit, self.above, self.queries_until, self.fail_at = limit, above, queries_until, fail_at
        self.needed = needed or queries_until  # what "LoadGen" says it needs (it may be short)
        self.trials: list[Trial] = []

    def __call__(self, trial: Trial) -> Point:
        self.trials.append(trial)
        qps = CALIBRATED if trial.target_qps is None else trial.target_qps
        if self.fail_at is not None and qps >= self.fail_at:
            return Point(qps, Verdict.FAILED, None, ("the LoadGen test ran past 60 s and was killed",), trial.phase)
        queries = trial.min_query_count or int(10 * qps)  # a 10 s run issues 10 x QPS queries
        if queries < self.queries_until:
            return Point(qps, Verdict.QUERIES, "INVALID", ("Early stopping satisfied: NO",), trial.phase,
                         query_count=queries, queries_needed=self.needed)
        verdict = Verdict.VALID if qps <= self.limit else self.above
        served = min(qps, self.limit)
        return Point(qps, verdict, "VALID" if verdict is Verdict.VALID else "INVALID", (), trial.phase,
                     query_count=queries, completed_qps=served, tokens_per_second=8 * served,
                     latency_p99_ns=1e6 * (1 if qps <= self.limit else qps), min_query_count=trial.min_query_count)


def _search_qps(found: Search) -> list[float]:
    return [p.target_qps for p in found.points if p.phase == "search"]


def test_grows_from_the_calibrated_qps_then_bisects_within_the_tolerance() -> None:
    sut = Scripted(limit=57.0)
    found = search(sut, None, runs=20, sweep_points=0)
    assert sut.trials[0].target_qps is None  # the first point calibrates
    qps = _search_qps(found)
    assert qps[:4] == [10.0, 20.0, 40.0, 80.0]  # x2 while VALID
    assert qps[4] == 60.0  # then the middle of [40, 80]
    assert found.converged and found.peak is not None
    low, high = bracket(list(found.points))
    assert found.peak.target_qps == low <= 57.0 < high <= low * (1 + pk.TOLERANCE)
    assert "converged" in found.stopped


def test_a_user_target_qps_is_the_starting_point() -> None:
    sut = Scripted(limit=57.0)
    found = search(sut, 30.0, runs=20, sweep_points=0)
    assert sut.trials[0].target_qps == 30.0 and _search_qps(found)[:3] == [30.0, 60.0, 45.0]


def test_an_invalid_start_halves_until_valid() -> None:
    found = search(Scripted(limit=3.0), None, runs=20, sweep_points=0)
    assert _search_qps(found)[:3] == [10.0, 5.0, 2.5]
    assert found.peak is not None and 2.5 <= found.peak.target_qps <= 3.0


def test_the_budget_ends_the_search_and_the_peak_is_the_highest_valid_point() -> None:
    found = search(Scripted(limit=1000.0), None, runs=4, sweep_points=0)
    assert _search_qps(found) == [10.0, 20.0, 40.0, 80.0]
    assert not found.converged and found.stopped == "search_runs 4 spent"
    assert found.peak is not None and found.peak.target_qps == 80.0


def test_too_few_queries_is_rerun_with_what_loadgen_asked_for_and_does_not_bound() -> None:
    sut = Scripted(limit=57.0, queries_until=150)  # the first runs have 100 queries
    found = search(sut, None, runs=20, sweep_points=0)
    first, rerun = found.points[0], found.points[1]
    assert first.verdict is Verdict.QUERIES and first.target_qps == rerun.target_qps == CALIBRATED
    assert sut.trials[1].min_query_count == 165  # 150 needed + 10 %
    assert rerun.verdict is Verdict.VALID  # the QUERIES point never counted as "too fast"
    assert found.peak is not None and 40.0 <= found.peak.target_qps <= 57.0


def test_still_too_few_queries_after_a_rerun_bounds_the_qps() -> None:
    sut = Scripted(limit=1000.0, queries_until=10_000)  # needs more than a rerun gives
    found = search(sut, None, runs=6, sweep_points=0)
    assert [p.verdict for p in found.points[:1]] == [Verdict.UNCONFIRMED]  # 11000 > 8x the 100 run
    assert found.points[0].reasons[-1] == "a rerun would need 11000 queries, over 8x the 100 of this run"
    assert found.peak is None and found.points[1].target_qps == CALIBRATED / 2


def test_a_rerun_with_enough_queries_decides() -> None:
    sut = Scripted(limit=1000.0, queries_until=500)  # 550 <= 8 x 200: rerun once
    found = search(sut, 20.0, runs=3, sweep_points=0)
    assert found.points[0].verdict is Verdict.QUERIES
    assert sut.trials[1] == Trial(20.0, min_query_count=550)
    assert found.points[1].verdict is Verdict.VALID and sut.trials[2].target_qps == 40.0
    assert pk.rerun_queries(Point(5.0, Verdict.QUERIES, "INVALID", query_count=40)) == (88, "")  # 2x without a hint


def test_a_rerun_still_short_of_queries_bounds_the_qps() -> None:
    sut = Scripted(limit=1000.0, queries_until=700, needed=500)  # LoadGen's estimate falls short
    found = search(sut, 20.0, runs=3, sweep_points=0)
    assert [p.verdict for p in found.points[:2]] == [Verdict.QUERIES, Verdict.UNCONFIRMED]
    assert found.points[1].reasons[-1] == "still too few queries with min_query_count 550"
    assert found.points[2].target_qps == 10.0  # bounded at 20: the search goes down


def test_sut_errors_bound_the_qps_like_latency() -> None:
    found = search(Scripted(limit=30.0, above=Verdict.SUT_ERRORS), None, runs=20, sweep_points=0)
    assert found.peak is not None and 27.0 <= found.peak.target_qps <= 30.0 and found.converged


def test_a_failed_test_stops_the_search_and_keeps_the_points() -> None:
    found = search(Scripted(limit=1000.0, fail_at=40.0), None, runs=20, sweep_points=3)
    assert [p.verdict for p in found.points] == [Verdict.VALID, Verdict.VALID, Verdict.FAILED]
    assert found.peak is not None and found.peak.target_qps == 20.0
    assert "failed at 40" in found.stopped and found.curve()[-1].target_qps == 20.0  # no sweep after it


def test_the_sweep_reaches_1_2x_the_peak_and_reuses_measured_points() -> None:
    sut = Scripted(limit=57.0)
    found = search(sut, None, runs=20, sweep_points=4)
    assert found.peak is not None
    peak = found.peak.target_qps
    sweep = [p for p in found.points if p.phase == "sweep"]
    assert sweep and sweep[-1].target_qps == pytest.approx(pk.SWEEP_TOP * peak, rel=1e-3)
    searched = _search_qps(found)
    planned = [10 + (pk.SWEEP_TOP * peak - 10) * i / 4 for i in range(1, 5)]
    reused = [t for t in planned if any(abs(q - t) <= pk.REUSE * t for q in searched)]
    assert len(sweep) == 4 - len(reused)
    assert not any(p.target_qps in searched for p in sweep)
    assert [p.target_qps for p in found.curve()] == sorted(p.target_qps for p in found.points)


def test_sweep_targets_skip_measured_qps() -> None:
    points = [Point(q, Verdict.VALID, "VALID") for q in (10.0, 20.0, 40.0)]
    assert sweep_targets(points, 40.0, 3) == [22.67, 35.33, 48.0]
    assert sweep_targets(points, 40.0, 0) == []
    assert sweep_targets(points, 100 / 3, 3) == [30.0]  # 20 and 40 (= 1.2 x the peak) are measured
    assert sweep_targets(points, 100 / 3 * 1.01, 3) == [30.27]  # 20.13 and 40.4 are within 2 % of 20 and 40


def test_no_valid_point_means_no_sweep() -> None:
    found = search(Scripted(limit=0.5), None, runs=3, sweep_points=4)
    assert found.peak is None and all(p.phase == "search" for p in found.points) and len(found.points) == 3


# -- classification of what LoadGen logged (values as LoadGen 6.0.17 writes them) ----------

_ES_TEXT = (" * Run unsuccessful.  * Processed 252 queries.  * Would need to run at least 207 more queries,"
            "  with the run being successful if every additional  query were under latency.")


def _log(**values: object) -> DetailLog:
    base: dict[str, object] = {"result_validity": "INVALID", "result_min_duration_met": True,
                               "result_min_queries_met": True, "early_stopping_met": True,
                               "result_perf_constraints_met": True}
    return DetailLog({**base, **values})


@pytest.mark.parametrize(("values", "sut_errors", "verdict"), [
    ({"result_validity": "VALID"}, False, Verdict.VALID),
    ({"result_validity": "VALID"}, True, Verdict.SUT_ERRORS),
    ({"result_perf_constraints_met": False, "early_stopping_met": False}, False, Verdict.LATENCY),
    ({"early_stopping_met": False, "early_stopping_ttft_result": _ES_TEXT}, False, Verdict.QUERIES),
    ({"result_min_queries_met": False}, False, Verdict.QUERIES),
    ({"result_min_duration_met": False}, False, Verdict.QUERIES),
    ({}, False, Verdict.LATENCY),  # INVALID with no known check failed: the verdict stands
])
def test_classify(values: dict[str, object], sut_errors: bool, verdict: Verdict) -> None:
    assert classify(_log(**values), sut_errors) is verdict


def test_queries_needed_reads_loadgen_early_stopping_text() -> None:
    logged = _log(early_stopping_ttft_result=_ES_TEXT, early_stopping_tpot_result=" * Run successful.")
    assert pk.queries_needed(logged) == 252 + 207
    assert pk.queries_needed(_log()) is None


# -- the result section and the curve files --------------------------------------------------


def _base_part(status: str = "valid") -> ResultPart:
    mlperf = {"result_validity": "VALID" if status == "valid" else "INVALID", "submission_blockers": ["x"],
              "summary": {"result": 1.0, "units": "Tokens/s", "metric_key": "k"}}
    return ResultPart(status="valid" if status == "valid" else "invalid",
                      benchmark={"suite": "mlperf-inference", "mode": "PerformanceOnly",
                                 "primary_metric": "tokens_per_second"},
                      metrics={"tokens_per_second": Metric(8.0, "tokens/s", True)},
                      invalid_reasons=(), sections={"mlperf": mlperf})


def _section_schema() -> Callable[[object], None]:
    import json

    return jsonschema.Draft202012Validator(json.loads(plugin.SECTION_SCHEMA.read_text())).validate


def test_peak_part_carries_the_search_and_validates() -> None:
    found = search(Scripted(limit=57.0), None, runs=20, sweep_points=2)
    part = peak_part(_base_part(), found)
    section = part.sections["mlperf"]["peak_search"]
    assert part.status == "valid" and part.benchmark["mode"] == "PeakQPS"
    assert part.metrics["peak_qps"] == Metric(found.peak.target_qps if found.peak else None, "queries/s", True)
    assert BLOCKER in part.sections["mlperf"]["submission_blockers"]
    assert found.peak is not None and section["peak_qps"] == found.peak.target_qps
    assert section["runs"] + section["sweep_runs"] == len(section["points"]) == len(found.points)
    assert [c["target_qps"] for c in section["curve"]] == sorted(c["target_qps"] for c in section["curve"])
    assert {p["phase"] for p in section["points"]} == {"search", "sweep"}
    _section_schema()(part.sections["mlperf"])


def test_no_valid_point_is_invalid_with_the_reason() -> None:
    found = search(Scripted(limit=0.5), None, runs=2, sweep_points=2)
    part = peak_part(_base_part("invalid"), found)
    assert part.status == "invalid" and part.metrics["peak_qps"].value is None
    assert part.invalid_reasons[0].startswith("no QPS was VALID (tried 10, 5): even the calibrated QPS 10 was INVALID")
    assert search_section(found)["peak_qps"] is None and len(search_section(found)["points"]) == 2
    _section_schema()(part.sections["mlperf"])


def test_the_schema_refuses_a_bad_peak_search() -> None:
    found = search(Scripted(limit=57.0), None, runs=5, sweep_points=0)
    mlperf = dict(peak_part(_base_part(), found).sections["mlperf"])
    mlperf["peak_search"] = {**mlperf["peak_search"], "points": [{"target_qps": "fast"}]}
    with pytest.raises(jsonschema.ValidationError):
        _section_schema()(mlperf)


def test_curve_csv_rows_are_sorted_with_the_peak_marked(tmp_path: Path) -> None:
    found = search(Scripted(limit=57.0), None, runs=20, sweep_points=2)
    path = curve.write_csv(found, tmp_path)
    rows = list(csv.DictReader(path.open()))
    assert [float(r["target_qps"]) for r in rows] == sorted(float(r["target_qps"]) for r in rows)
    assert len(rows) == len(found.curve())
    peaks = [r for r in rows if r["peak"] == "True"]
    assert found.peak is not None and [float(r["target_qps"]) for r in peaks] == [found.peak.target_qps]
    assert {r["result_validity"] for r in rows} == {"VALID", "INVALID"}


def test_curve_png_exactly_when_matplotlib_is_importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = search(Scripted(limit=57.0), None, runs=20, sweep_points=2)
    path = curve.write_png(found, tmp_path)
    assert (path is None) == (importlib.util.find_spec("matplotlib") is None)
    if path is not None:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it now fails
    assert curve.write_png(found, tmp_path / "none") is None


def test_progress_is_one_line_per_point(caplog: pytest.LogCaptureFixture) -> None:
    from cmx_mlperf.harness.peak_step import _progress

    caplog.set_level(logging.INFO, logger="cmx.mlperf.peak")
    found = search(Scripted(limit=57.0), None, runs=20, sweep_points=1, log=_progress)
    lines = [r.getMessage() for r in caplog.records if r.name == "cmx.mlperf.peak"]
    assert len(lines) == len(found.points)
    assert lines[0] == "PeakQPS search: 10 QPS -> VALID (valid)"
    assert any("-> INVALID (latency)" in line for line in lines)


# -- docs/mlperf-peak-qps.md states the constants the code uses ------------------------------

DOC = Path(__file__).resolve().parents[3] / "docs" / "mlperf-peak-qps.md"


@pytest.mark.parametrize("phrase", [
    f"doubles it (x{pk.GROWTH:g})", f"within {pk.TOLERANCE:.0%}".replace("%", " %"),
    f"up to {pk.SWEEP_TOP:g}x", f"within {pk.REUSE:.0%}".replace("%", " %"),
    f"more than {pk.MAX_RERUN_FACTOR}x", f"plus {pk.RERUN_MARGIN - 1:.0%}".replace("%", " %"),
    "PeakQPS is an exploration mode, not a submission run",
    "no QPS was VALID (tried ...): even the calibrated QPS X was",
])
def test_the_doc_states_what_the_code_does(phrase: str) -> None:
    assert BLOCKER == "PeakQPS is an exploration mode, not a submission run"
    assert phrase in " ".join(DOC.read_text().split())


def test_a_sweep_point_short_of_queries_is_kept_not_rerun() -> None:
    sut = Scripted(limit=57.0)

    def short_sweep(trial: Trial) -> Point:
        point = sut(trial)
        return point if trial.phase == "search" else Point(
            point.target_qps, Verdict.QUERIES, "INVALID", ("Early stopping satisfied: NO",), "sweep",
            query_count=600, queries_needed=700)

    found = search(short_sweep, None, runs=20, sweep_points=2)
    sweep = [t for t in sut.trials if t.phase == "sweep"]
    assert len(sweep) == 2 and all(t.min_query_count is None for t in sweep)
    assert [p.verdict for p in found.points if p.phase == "sweep"] == [Verdict.QUERIES] * 2


def test_step_defaults_are_the_recipes() -> None:
    import yaml

    from cmx_mlperf.harness import peak_step

    recipe = yaml.safe_load((Path(plugin.__file__).parent / "recipes" / "llama.yaml").read_text())["inputs"]
    assert (peak_step.DEFAULT_RUNS, peak_step.DEFAULT_SWEEP) == (recipe["search_runs"]["default"],
                                                                 recipe["sweep_points"]["default"]) == (8, 4)
    assert "the recipe's defaults (8 and 4)" in DOC.read_text()
