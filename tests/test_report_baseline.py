"""The report's baseline (issue 53 item 4): by default the earliest run of the newest run's
configuration and hardware class that is not flagged (a facts file, noisy conditions, a
failure); ``--baseline RUN`` names it; a name that is not one of the runs is one line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.report.baseline import choose, flag_of
from cmx_core.results.examples import example_document

NOISY = {"version": 1, "window_s": 1.0, "cpus": 2, "warnings": [
    {"cause": "outside_cores", "message": "other processes used 1.9 of 2 CPUs during the run"}]}


def _run(tmp_path: Path, run_id: str, size: int, minute: int, **changes: Any) -> dict[str, Any]:
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(100.0, "items/s", True)})
    start = datetime(2026, 12, 1, tzinfo=timezone.utc) + timedelta(minutes=minute)
    return example_document(tmp_path / run_id, run_id=run_id, part=part, inputs={"size": size},
                            started_at=start, finished_at=start + timedelta(seconds=1), **changes)


def _ids(groups: Any) -> list[str]:
    return [g[0]["run_id"] for g in groups]


def test_the_earliest_unflagged_run_of_the_newest_configuration_is_the_baseline(tmp_path: Path) -> None:
    edited = _run(tmp_path, "edited", 200, 0, facts_file={"path": "/tmp/edited.json", "sha256": "ab" * 32})
    noisy = _run(tmp_path, "noisy", 200, 1)
    noisy = {**noisy, "conditions": NOISY}
    other_size = _run(tmp_path, "small", 20, 2)
    fair, newest = _run(tmp_path, "fair", 200, 3), _run(tmp_path, "newest", 200, 4)
    groups = [[edited], [noisy], [other_size], [fair], [newest]]
    chosen = choose(groups)
    assert _ids(chosen.groups) == ["fair", "edited", "noisy", "small", "newest"]
    assert "earliest run of the newest run's configuration and hardware class" in chosen.why
    assert "not edited (planned from the facts file /tmp/edited.json" in chosen.why and "not noisy" in chosen.why
    assert flag_of(other_size) is None and "noisy conditions" in str(flag_of(noisy))


def test_a_named_baseline_wins_and_an_unknown_one_is_one_line(tmp_path: Path) -> None:
    groups = [[_run(tmp_path, "a1", 1, 0)], [_run(tmp_path, "b2", 1, 1)]]
    assert _ids(choose(groups, "b2").groups) == ["b2", "a1"]
    with pytest.raises(UsageError, match="--baseline zz: not one of the report's runs"):
        choose(groups, "zz")


def test_with_no_fair_run_of_that_configuration_the_earliest_unflagged_one_is_taken(tmp_path: Path) -> None:
    edited = _run(tmp_path, "edited", 200, 0, facts_file={"path": "/tmp/edited.json", "sha256": "ab" * 32})
    groups = [[edited], [_run(tmp_path, "small", 20, 1)], [_run(tmp_path, "newest", 200, 2)]]
    chosen = choose(groups)
    assert _ids(chosen.groups) == ["small", "edited", "newest"]  # never the flagged one, nor the newest itself
    assert "the earliest run that is not flagged; no unflagged earlier run has the newest" in chosen.why
