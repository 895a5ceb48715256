"""What a report page holds: latency percentiles and token-latency plots for LLM runs, scores
and medals of MLE/ALE-style sections, escaped values, no script; the comparison of repeats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmx_core.providers.values import Metric, ResultPart
from cmx_core.report import plots
from cmx_core.report.collect import ReportData, _latency_figures, score_rows
from cmx_core.report.html import render
from cmx_core.results.examples import example_document


def _llm(tmp_path: Path, run_id: str, scale: float) -> dict[str, Any]:
    summary = {p: int(v * scale) for p, v in zip(plots.PERCENTILES, (10e6, 20e6, 25e6, 28e6, 40e6, 90e6),
                                                  strict=True)}
    benchmark = {"suite": "custom", "task": "llm", "primary_metric": "tokens_per_second"}
    part = ResultPart(status="valid", benchmark=benchmark,
                      metrics={"tokens_per_second": Metric(100.0 / scale, "tokens/s", True)})
    document = example_document(tmp_path / run_id, run_id=run_id, part=part)
    document["mlperf"] = {"latency_ns": summary, "ttft_ns": {"p50": 5e6, "p90": 9e6, "p99": 12e6},
                          "tpot_ns": {"p50": 1e6, "p99": None}, "itl_ns": {"p50": 2e6, "p90": 3e6}}
    return document


def test_latency_and_token_latency_plots(tmp_path: Path) -> None:
    docs = [_llm(tmp_path, "r1", 1.0), _llm(tmp_path, "r2", 1.5)]
    titles = [f.title for f in _latency_figures(docs)]
    assert titles == ["latency percentiles", "ttft percentiles", "tpot percentiles", "itl percentiles"]
    [r1, _r2] = plots.latency_series(docs, "latency_ns")
    assert r1.x == plots.PERCENTILES and r1.y[0] == 10.0  # ns -> ms
    [tpot, _] = plots.latency_series(docs, "tpot_ns")
    assert tpot.x == ("p50",)  # a null percentile is left out, not drawn as zero
    assert plots.latency_series([example_document(tmp_path / "plain")], "latency_ns") == []


def test_scores_and_medals_table_and_escaping(tmp_path: Path) -> None:
    doc = example_document(tmp_path / "m", run_id="mle-1")
    doc["mlebench"] = {"score": 0.91, "gold_medal": False, "silver_medal": True, "bronze_medal": False,
                       "any_medal": True, "above_median": True}
    doc["alebench"] = {"score": 1234, "rank": 17}
    doc["benchmark"]["task"] = "<script>alert(1)</script>"
    rows = score_rows([doc])
    assert [r["section"] for r in rows] == ["mlebench", "alebench"]
    assert rows[0]["silver_medal"] is True and rows[1]["rank"] == 17
    html = render(ReportData("t <b>", (doc,), None, None, (), tuple(rows)))
    assert "Scores and medals" in html and "silver_medal" in html and "0.91" in html
    assert "<script" not in html and "t &lt;b&gt;" in html


def test_page_has_the_comparison_of_repeats(tmp_path: Path) -> None:
    from cmx_core.results.compare import compare_samples

    base = [_llm(tmp_path, f"a{i}", s) for i, s in enumerate((1.0, 1.1))]
    other = [_llm(tmp_path, f"b{i}", s) for i, s in enumerate((1.05, 1.2))]
    comparison = compare_samples([base, other])
    html = render(ReportData("cmp", (*base, *other), comparison, None, (), ()))
    assert "Comparison (baseline a0)" in html and "within noise" in html and "n=2" in html


def test_page_says_why_its_baseline_and_what_changed(tmp_path: Path) -> None:
    from cmx_core.report.baseline import choose
    from cmx_core.results.compare import compare_samples

    def sized(run_id: str, size: int, rate: float) -> dict[str, Any]:
        part = ResultPart(status="valid", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                          metrics={"rate": Metric(rate, "items/s", True), "items": Metric(size, "items", True)})
        return example_document(tmp_path / run_id, run_id=run_id, part=part, inputs={"size": size})

    groups = [[sized("big1", 200, 10.0)], [sized("small", 20, 90.0)], [sized("big2", 200, 11.0)]]
    chosen = choose(groups)
    comparison = compare_samples(chosen.groups)
    html = render(ReportData("recipe demo", tuple(d for g in groups for d in g), comparison, None, (), (),
                             baseline=chosen.why))
    assert "Comparison (baseline big1)" in html and "the earliest run of the newest run&#39;s configuration" in html
    assert "What changed between the runs (configuration, never better or worse): size." in html
    assert "size=20" in html and "input" in html


def test_a_serving_sweep_gets_its_throughput_against_p99_front(tmp_path: Path) -> None:
    """Four runs at four target QPS: throughput against p99 latency with the front marked; the
    run that is slower and later than another is off the front; the page draws the figure."""
    from cmx_core.report.collect import Figure
    from cmx_core.report.pareto import trade_offs

    def served(run_id: str, qps: int, rate: float, p99_ms: float) -> dict[str, Any]:
        part = ResultPart(status="valid", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                          metrics={"rate": Metric(rate, "samples/s", True)})
        document = example_document(tmp_path / run_id, run_id=run_id, part=part, inputs={"target_qps": qps})
        document["mlperf"] = {"latency_ns": {"p50": p99_ms * 5e5, "p99": p99_ms * 1e6}}
        return document

    runs = [served("q10", 10, 10.0, 5.0), served("q20", 20, 19.5, 8.0), served("q40", 40, 30.0, 40.0),
            served("bad", 30, 18.0, 50.0)]
    [latency] = trade_offs(runs)  # no energy recorded: one figure
    assert latency.title == "rate against p99 latency (Pareto front marked)" and latency.ylabel == "samples/s"
    assert [p.run_id for p in latency.front] == ["q10", "q20", "q40"]  # "bad": less throughput at more latency
    assert {p.label for p in latency.points} == {"target_qps=10", "target_qps=20", "target_qps=40", "target_qps=30"}
    png = plots.trade_off(latency)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    html = render(ReportData("serving", tuple(runs), None, None, (Figure(latency.title, png),), ()))
    assert "rate against p99 latency (Pareto front marked)" in html
    assert trade_offs(runs[:1]) == []  # one run is no trade-off
    plain = example_document(tmp_path / "plain", run_id="plain")  # first, with no throughput nor latency
    [named] = trade_offs([plain, *runs])
    assert named.ylabel == "samples/s" and named.title.startswith("rate against")


def _timed_run(tmp_path: Path, run_id: str, minute: int, reps: tuple[float, ...], facts: str | None = None,
               size: int = 100) -> dict[str, Any]:
    from datetime import datetime, timedelta, timezone

    part = ResultPart(status="valid", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(max(reps), "items/s", True, reps if len(reps) > 1 else ())})
    start = datetime(2026, 12, 1, tzinfo=timezone.utc) + timedelta(minutes=minute)
    changes: dict[str, Any] = {"run_id": run_id, "part": part, "inputs": {"size": size}, "started_at": start,
                               "finished_at": start + timedelta(seconds=1)}
    if facts:
        changes["facts"] = json.loads((Path(__file__).resolve().parents[1] / "examples" / "facts" /
                                        f"{facts}.json").read_text())["facts"]
    return example_document(tmp_path / run_id, **changes)


def test_a_metric_over_time_marks_a_run_beyond_the_previous_runs_band(tmp_path: Path) -> None:
    from cmx_core.report.history import histories

    runs = [_timed_run(tmp_path, "t1", 0, (99.0, 100.0, 101.0)), _timed_run(tmp_path, "t2", 1, (98.0, 100.5, 102.0)),
            _timed_run(tmp_path, "t3", 2, (80.0, 81.0, 82.0)), _timed_run(tmp_path, "t4", 3, (81.0,)),
            _timed_run(tmp_path, "x1", 4, (5.0, 6.0), size=7)]  # another configuration: no history of 3
    [history] = histories(runs)
    assert [m.run_id for m in history.moments] == ["t1", "t2", "t3", "t4"]
    assert [m.run_id for m in history.regressions] == ["t3"]  # t4 has one value: noise unknown, never marked
    assert history.title.startswith("rate over time (size=100;")
    assert plots.history(history)[:8] == b"\x89PNG\r\n\x1a\n"


def test_another_hardware_class_is_a_line_of_its_own(tmp_path: Path) -> None:
    from cmx_core.report.axes import axis_plots

    groups = [[_timed_run(tmp_path, f"h{size}", size, (float(size),), facts="h100-sxm-8x", size=size)]
              for size in (1, 2)]
    groups += [[_timed_run(tmp_path, f"l{size}", 10 + size, (float(size) / 2,), facts="l4-1x", size=size)]
               for size in (1, 2)]
    [plot] = [p for p in axis_plots(groups) if p.metric == "rate"]
    assert len(plot.lines) == 2 and all(len(line.points) == 2 for line in plot.lines)
    assert len({line.label for line in plot.lines}) == 2
