"""Verdicts that use conditions (issue 43 item 4), built from recorded ``Conditions`` records
so that they do not depend on this machine's speed or load: where the two sides' conditions
differ beyond their bounds the verdict is ``inconclusive`` naming the condition, never
``differs``; the same busy machine on both sides is ``inconclusive`` too; under matching quiet
conditions a planted 2x slowdown still ``differs``; results without a conditions section are
judged as before and say ``conditions not recorded``. The real replays beside a burner:
tests/test_replay_busy.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.bundle.replay import ReplayReport
from cmx_core.bundle.verdict import judge
from cmx_core.cli.bundle_cmd import _print_replay
from cmx_core.conditions.judge import judge as judge_noise
from cmx_core.conditions.record import Conditions
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import ResultStore, write_result
from cmx_core.results.compare import compare_samples
from cmx_core.results.examples import example_document
from cmx_core.results.like_with_like import compare_sides

UNKNOWN = {"unknown": "not here"}
QUIET, BUSY = 0.1, 1.4
"""Other processes' CPU use, in cores of 2: below and above the 0.25-a-CPU bound."""


def conditions(outside: float, window_s: float = 2.0, omp: str | None = None) -> dict[str, Any]:
    """A recorded conditions section of a 2-CPU machine with ``outside`` cores of other load."""
    reads = {name: UNKNOWN for name in ("governor", "boost", "freq_khz", "freq_limits_khz", "cpu_throttle_events",
                                        "gpu_throttle", "gpu_persistence", "cpu_quota")}
    data: dict[str, Any] = {
        "version": 1, "window_s": window_s, "cpus": 2, "load_before": {"value": [1.0, 1.0, 1.0]},
        "load_after": {"value": [1.0, 1.0, 1.0]}, "run_cores": {"value": 1.0}, "outside_cores": {"value": outside},
        "steal_cores": {"value": 0.0}, **reads, "numa_balancing": {"value": 0}, "randomize_va_space": {"value": 2},
        "isolated_cpus": {"value": []},
        "threads": {"OMP_NUM_THREADS": {"value": omp} if omp else {"unknown": "not set"}}}
    record = Conditions.from_json(data)
    return replace(record, warnings=judge_noise(record)).to_json()


def doc(tmp_path: Path, run_id: str, value: float, outside: float | None, unit: str = "items/s",
        **kw: Any) -> dict[str, Any]:
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(value, unit, True)})
    document = example_document(tmp_path / run_id, run_id=run_id, part=part)
    return document if outside is None else {**document, "conditions": conditions(outside, **kw)}


def side(tmp_path: Path, name: str, values: tuple[float, ...], outside: float | None) -> list[dict[str, Any]]:
    return [doc(tmp_path, f"{name}{i}", v, outside) for i, v in enumerate(values)]


STEADY = (100.0, 101.0, 99.0, 100.5)
SLOW = (50.0, 50.5, 49.5, 50.2)
"""A planted 2x slowdown."""


def test_planted_slowdown_under_matching_quiet_conditions_differs(tmp_path: Path) -> None:
    judgement = judge(side(tmp_path, "o", STEADY, QUIET), side(tmp_path, "r", SLOW, QUIET))
    assert judgement.verdict == "differs", judgement.reason
    assert judgement.conditions is not None and judgement.conditions.state == "quiet"
    assert judgement.to_json()["conditions"]["state"] == "quiet"


@pytest.mark.parametrize(("record", "replay", "named"), [
    (BUSY, QUIET, "other load 1.4 cores at record, 0.1 cores at replay"),
    (QUIET, BUSY, "other load 0.1 cores at record, 1.4 cores at replay"),
])
def test_conditions_that_differ_make_a_change_inconclusive(tmp_path: Path, record: float, replay: float,
                                                             named: str) -> None:
    judgement = judge(side(tmp_path, "o", STEADY, record), side(tmp_path, "r", SLOW, replay))
    assert judgement.verdict == "inconclusive" and named in judgement.reason
    [rate] = [m for m in judgement.metrics if m.name == "rate"]
    assert rate.verdict == "inconclusive" and rate.reason.startswith(f"conditions differ: {named}")
    assert "-50" in rate.reason  # the numbers are still said


def test_the_same_busy_machine_on_both_sides_is_inconclusive(tmp_path: Path) -> None:
    judgement = judge(side(tmp_path, "o", STEADY, BUSY), side(tmp_path, "r", SLOW, BUSY))
    assert judgement.verdict == "inconclusive" and "conditions noisy" in judgement.reason
    assert "other processes used 1.4 of 2 CPUs" in judgement.reason


def test_matching_conditions_within_noise_reproduce(tmp_path: Path) -> None:
    assert judge(side(tmp_path, "o", STEADY, QUIET), side(tmp_path, "r", STEADY, QUIET)).verdict == "reproduced"
    # a busy side does not turn a reproduction into anything else: only "differs" is held back
    assert judge(side(tmp_path, "o", STEADY, BUSY), side(tmp_path, "r", STEADY, QUIET)).verdict == "reproduced"


def test_a_thread_setting_that_differs_is_named(tmp_path: Path) -> None:
    original = [doc(tmp_path, f"o{i}", v, QUIET, omp="1") for i, v in enumerate(STEADY)]
    replay = [doc(tmp_path, f"r{i}", v, QUIET, omp="2") for i, v in enumerate(SLOW)]
    judgement = judge(original, replay)
    assert judgement.verdict == "inconclusive" and "OMP_NUM_THREADS 1 at record, 2 at replay" in judgement.reason


def test_short_windows_are_not_judged_on_cpu_use(tmp_path: Path) -> None:
    """Under 0.5 s, /proc/stat's ticks are too coarse: the load is not compared (quiet)."""
    one = [doc(tmp_path, f"o{i}", v, BUSY, window_s=0.2) for i, v in enumerate(STEADY)]
    two = [doc(tmp_path, f"r{i}", v, QUIET, window_s=0.2) for i, v in enumerate(SLOW)]
    assert compare_sides(one, two).state == "quiet" and judge(one, two).verdict == "differs"


def test_results_without_conditions_keep_todays_verdict_and_say_so(tmp_path: Path) -> None:
    judgement = judge(side(tmp_path, "o", STEADY, None), side(tmp_path, "r", SLOW, QUIET))
    assert judgement.verdict == "differs" and "conditions not recorded at record" in judgement.reason
    assert judgement.conditions is not None and judgement.conditions.state == "not recorded"


def test_compare_holds_back_better_or_worse_where_conditions_differ(tmp_path: Path) -> None:
    base = side(tmp_path, "b", STEADY, BUSY)
    for outside, verdict in ((QUIET, "inconclusive"), (None, "worse")):
        comparison = compare_samples([base, side(tmp_path, f"c{outside}", SLOW, outside)])
        cell = next(m for m in comparison.metrics if m.name == "rate").cells[1]
        assert cell.verdict == verdict, cell
        run = comparison.to_json()["runs"][1]
        assert run["conditions"]["state"] == ("differ" if outside else "not recorded")
    assert cell.noise and "beyond the noise" in cell.noise
    quiet = compare_samples([side(tmp_path, "q", STEADY, QUIET), side(tmp_path, "s", SLOW, QUIET)])
    assert next(m for m in quiet.metrics if m.name == "rate").cells[1].verdict == "worse"


def test_cli_compare_names_the_condition(cli: Callable[..., Any], tmp_path: Path) -> None:
    store = ResultStore(paths.results_db())
    ids = []
    for name, values, outside in (("b", STEADY, BUSY), ("c", SLOW, QUIET)):
        for document in side(tmp_path, name, values, outside):
            ids.append(document["run_id"])
            store.index(document, write_result(tmp_path / document["run_id"], document, suites=None))
    done = cli("results", "compare", ",".join(ids[:4]), ",".join(ids[4:]), "--json")
    assert done.code == 0, done.err
    assert "note: run c0: conditions differ: other load 1.4 cores at the baseline, 0.1 cores at this run" in done.err
    rate = next(m for m in json.loads(done.out)["metrics"] if m["name"] == "rate")
    assert rate["cells"][1]["verdict"] == "inconclusive"


def test_replay_text_prints_the_conditions_under_the_verdict(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    judgement = judge(side(tmp_path, "o", STEADY, BUSY), side(tmp_path, "r", SLOW, QUIET))
    _print_replay(ReplayReport("b.tar.gz", (), (judgement,)), 200)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("inconclusive: ")
    assert any(line.startswith("conditions differ: other load 1.4 cores at record") for line in lines[2:4]), lines


@pytest.mark.parametrize(("unit", "held"), [("items/s", True), ("s", True), ("tokens per second", True),
                                            ("ms", True), ("W", True), ("", True), ("score", False),
                                            ("items", False), ("%", False)])
def test_only_a_metric_the_machines_speed_moves_is_held_back(tmp_path: Path, unit: str, held: bool) -> None:
    """Load explains a slower run, not another score or count: on a busy machine a changed
    score still differs (and is worse in compare), a changed rate is inconclusive."""
    original = [doc(tmp_path, f"o{i}", v, BUSY, unit=unit) for i, v in enumerate(STEADY)]
    replay = [doc(tmp_path, f"r{i}", v, BUSY, unit=unit) for i, v in enumerate(SLOW)]
    assert judge(original, replay).verdict == ("inconclusive" if held else "differs")
    cell = next(m for m in compare_samples([original, replay]).metrics if m.name == "rate").cells[1]
    assert cell.verdict == ("inconclusive" if held else "worse")
