"""``cmx run --runs N``: each metric's mean, median, bootstrap CI of the median, CV and
outliers over the repeats (cmx_core.results.repeats, reusing the replay rule's bootstrap);
a CV above the bound is a warning; bad values exit 2 in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cmx_core.results.noise import median_interval
from cmx_core.results.repeats import CV_BOUND, outliers, repeat_stats


def _doc(run_id: str, value: float) -> dict[str, Any]:
    return {"run_id": run_id, "benchmark": {"primary_metric": "rate"},
            "metrics": {"count": {"value": 7, "unit": "items"}, "rate": {"value": value, "unit": "items/s"},
                        "missing": {"value": None, "unit": "s"}}}


def test_the_statistics_of_the_repeats() -> None:
    stats = repeat_stats([_doc(f"r{i}", v) for i, v in enumerate([100.0, 101.0, 99.0, 100.0, 250.0])])
    assert [s.metric for s in stats] == ["rate", "count"]  # the primary first; a null metric left out
    rate = stats[0]
    assert rate.median == 100.0 and rate.mean == 130.0
    assert rate.outliers == (4,) and rate.to_json()["outliers"] == [{"run": "r4", "value": 250.0}]
    assert rate.cv is not None and rate.cv > CV_BOUND and "varies by CV" in (rate.warning() or "")
    assert rate.interval == median_interval(rate.values) and rate.interval[0] <= 100.0 <= rate.interval[1]
    count = stats[1]
    assert count.cv == 0.0 and count.outliers == () and count.warning() is None


def test_few_runs_have_no_interval_and_no_outliers() -> None:
    stats = repeat_stats([_doc("a", 1.0), _doc("b", 3.0)])
    assert stats[0].interval is None and stats[0].outliers == () and "CI needs 3 runs" in stats[0].text()
    assert outliers([5.0, 5.0, 5.0, 9.0]) == (3,)


def test_cmx_run_runs_reports_the_repeats(cli: Callable[..., Any]) -> None:
    done = cli("run", "recipe", "--tags=demo,sort", "--size=500", "--runs", "3", "--json", "-q")
    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert len(document["runs"]) == 3 and len({d["run_id"] for d in document["runs"]}) == 3
    primary = document["repeats"][0]
    assert primary["metric"] == "items_per_second" and primary["n"] == 3 and primary["interval"] is not None
    text = cli("run", "recipe", "--tags=demo,sort", "--size=500", "--runs", "2", "-q")
    assert text.code == 0 and "repeats: 2 runs" in text.out and text.out.strip().splitlines()[-1].startswith("result: ")


def test_bad_runs_exit_2_in_one_line(cli: Callable[..., Any]) -> None:
    for bad in (("--runs", "0"), ("--runs", "x"), ("--runs", "2", "--soak", "1s")):
        done = cli("run", "recipe", "--tags=demo,sort", *bad)
        assert done.code == 2 and len(done.err_lines) == 1, (bad, done.err)
