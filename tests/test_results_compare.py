"""compare_documents: deltas (absolute and %), verdicts by direction, unit mismatches flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core.errors import ResultsError
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import ResultStore, compare_documents, write_result
from cmx_core.results.examples import example_document, mlperf_part


def _doc(tmp_path: Path, run_id: str, **metrics: Metric) -> dict:
    primary = next(iter(metrics)) if metrics else None
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t", "primary_metric": primary},
                      metrics=metrics)
    return example_document(tmp_path / run_id, run_id=run_id, part=part)


def test_throughput_and_latency_directions(tmp_path: Path) -> None:
    base = example_document(tmp_path, run_id="base", part=mlperf_part(1000.0, 40_000_000))
    new = example_document(tmp_path, run_id="new", part=mlperf_part(1100.0, 50_000_000))
    comparison = compare_documents([base, new])
    assert [m.name for m in comparison.metrics] == ["samples_per_second", "latency_p99_ns", "timing.wall_s"]
    throughput, latency, _ = comparison.metrics
    assert throughput.cells[0].verdict == "baseline"
    cell = throughput.cells[1]
    assert (cell.verdict, cell.delta, cell.unit) == ("better", 100.0, "samples/s")
    assert cell.delta_pct == pytest.approx(10.0)
    cell = latency.cells[1]
    assert (cell.verdict, cell.delta) == ("worse", 10_000_000)  # higher latency is worse
    assert cell.delta_pct == pytest.approx(25.0)
    assert latency.higher_is_better is False


def test_lower_is_better_improvement_and_same(tmp_path: Path) -> None:
    docs = [_doc(tmp_path, "a", wall=Metric(2.0, "s", False), acc=Metric(0.75, "ratio", True)),
            _doc(tmp_path, "b", wall=Metric(1.5, "s", False), acc=Metric(0.75, "ratio", True))]
    wall, acc, _ = compare_documents(docs).metrics
    assert (wall.cells[1].verdict, wall.cells[1].delta, wall.cells[1].delta_pct) == ("better", -0.5, -25.0)
    assert (acc.cells[1].verdict, acc.cells[1].delta, acc.cells[1].delta_pct) == ("same", 0.0, 0.0)


def test_units_that_differ_are_flagged_not_compared(tmp_path: Path) -> None:
    docs = [_doc(tmp_path, "a", latency=Metric(20.0, "ms", False)),
            _doc(tmp_path, "b", latency=Metric(20_000_000, "ns", False))]
    row = compare_documents(docs).metrics[0]
    assert row.units_differ
    cell = row.cells[1]
    assert (cell.verdict, cell.delta, cell.delta_pct, cell.unit) == ("units differ", None, None, "ns")
    assert row.to_json()["units_differ"] is True


def test_direction_mismatch_missing_metrics_and_zero_baseline(tmp_path: Path) -> None:
    docs = [
        _doc(tmp_path, "a", errors=Metric(0, "count", False), score=Metric(1.0, "score", True)),
        _doc(tmp_path, "b", errors=Metric(3, "count", False), score=Metric(2.0, "score", False)),
        _doc(tmp_path, "c", extra=Metric(5.0, "s", False)),
        _doc(tmp_path, "d", errors=Metric(None, "count", False)),
    ]
    comparison = compare_documents(docs)
    rows = {m.name: m for m in comparison.metrics}
    assert list(rows) == ["errors", "extra", "score", "timing.wall_s"]
    errors = rows["errors"].cells
    assert (errors[1].verdict, errors[1].delta, errors[1].delta_pct) == ("worse", 3, None)  # 0 baseline: no %
    assert errors[2].verdict == "missing" and errors[3].verdict == "missing"
    assert rows["score"].cells[1].verdict == "direction differs"
    assert rows["extra"].cells[0].verdict == "missing" and rows["extra"].cells[2].verdict == "missing"
    assert rows["extra"].higher_is_better is False
    data = comparison.to_json()
    assert data["baseline"] == "a" and [r["run_id"] for r in data["runs"]] == ["a", "b", "c", "d"]


def test_compare_needs_two_runs(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"compare needs at least two runs"):
        compare_documents([_doc(tmp_path, "a")])


def test_store_compare_reads_runs_by_prefix(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results.sqlite")
    for run_id, value in (("base-1", 10.0), ("cand-1", 12.5)):
        doc = _doc(tmp_path, run_id, qps=Metric(value, "queries/s", True))
        store.index(doc, write_result(tmp_path / run_id, doc, suites=None))
    comparison = store.compare(["base", "cand"])
    assert [r.run_id for r in comparison.runs] == ["base-1", "cand-1"]
    assert comparison.metrics[0].cells[1].delta_pct == pytest.approx(25.0)


def test_wall_time_is_always_compared_last(tmp_path: Path) -> None:
    from datetime import timedelta

    from cmx_core.results.examples import example_record

    start = example_record(tmp_path).started_at
    docs = [example_document(tmp_path, run_id="slow", finished_at=start + timedelta(seconds=4)),
            example_document(tmp_path, run_id="fast", finished_at=start + timedelta(seconds=3))]
    [row] = compare_documents(docs).metrics  # plain recipes: no metrics, only the wall time
    assert (row.name, row.higher_is_better) == ("timing.wall_s", False)
    cell = row.cells[1]
    assert (cell.value, cell.unit, cell.delta, cell.delta_pct, cell.verdict) == (3.0, "s", -1.0, -25.0, "better")
