"""Noise-aware comparison: repeats form a distribution (median, min..max); a difference is
real only beyond the noise; one sample a side says "1 sample, noise unknown"; runs from other
hardware classes carry a warning; the replay verdicts follow the bootstrap rule of
cmx_core.results.noise."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.bundle.verdict import judge
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results.compare import NOISE_UNKNOWN, compare_samples
from cmx_core.results.examples import example_document

FACTS = Path(__file__).resolve().parent.parent / "examples" / "facts"


def _doc(tmp_path: Path, run_id: str, value: float | None, unit: str = "items/s", facts: str | None = None,
         status: str = "completed") -> dict[str, Any]:
    part = ResultPart(status=status, benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(value, unit, True)})
    changes: dict[str, Any] = {"run_id": run_id, "part": part}
    if facts:
        changes["facts"] = json.loads((FACTS / f"{facts}.json").read_text())["facts"]
    return example_document(tmp_path / run_id, **changes)


def _rate(comparison: Any) -> Any:
    return next(m for m in comparison.metrics if m.name == "rate")


def test_single_pair_says_noise_unknown(tmp_path: Path) -> None:
    cell = _rate(compare_samples([[_doc(tmp_path, "a", 100.0)], [_doc(tmp_path, "b", 110.0)]])).cells[1]
    assert (cell.verdict, cell.noise, cell.samples) == ("better", NOISE_UNKNOWN, 1)


def test_overlapping_repeats_are_within_noise(tmp_path: Path) -> None:
    base = [_doc(tmp_path, f"a{i}", v) for i, v in enumerate((90.0, 100.0, 110.0))]
    other = [_doc(tmp_path, f"b{i}", v) for i, v in enumerate((105.0, 108.0, 120.0))]
    row = _rate(compare_samples([base, other]))
    baseline, cell = row.cells
    assert (baseline.value, baseline.low, baseline.high, baseline.samples) == (100.0, 90.0, 110.0, 3)
    assert (cell.value, cell.verdict, cell.delta) == (108.0, "within noise", 8.0)
    assert cell.noise is not None and "ranges overlap" in cell.noise


def test_separated_repeats_are_a_real_difference(tmp_path: Path) -> None:
    base = [_doc(tmp_path, f"a{i}", v) for i, v in enumerate((99.0, 100.0, 101.0))]
    worse = [_doc(tmp_path, f"b{i}", v) for i, v in enumerate((80.0, 81.0, 82.0))]
    cell = _rate(compare_samples([base, worse])).cells[1]
    assert cell.verdict == "worse" and cell.noise is not None and "beyond the noise" in cell.noise
    single = _rate(compare_samples([base, [_doc(tmp_path, "c", 100.5)]])).cells[1]
    assert single.verdict == "within noise"  # one side's range holds the other's single value


def test_hardware_classes_are_grouped_and_warned(tmp_path: Path) -> None:
    h100, l4 = _doc(tmp_path, "h", 1.0, facts="h100-sxm-8x"), _doc(tmp_path, "l", 2.0, facts="l4-1x")
    comparison = compare_samples([[h100], [l4]])
    data = comparison.to_json()
    assert len(data["hardware_classes"]) == 2
    assert [g["runs"] for g in data["hardware_classes"].values()] == [["h"], ["l"]]
    # another hardware class is its own series: its value, never a delta, and no warning needed
    cell = next(m for m in comparison.metrics if m.name == "rate").cells[1]
    assert (cell.verdict, cell.delta, cell.value) == ("other series", None, 2.0)
    assert cell.noise == "another hardware class (1x l4 22GiB pcie drv535): its own series, not a delta"
    assert comparison.warnings == () and data["runs"][1]["against"] is None
    # compared across hardware on purpose: a delta, with the warning naming both classes
    across = compare_samples([[h100], [l4]], across=("hardware",))
    assert next(m for m in across.metrics if m.name == "rate").cells[1].delta == 1.0
    [warning] = across.warnings
    assert "hardware class" in warning and "accelerator h100 -> l4" in warning
    assert compare_samples([[h100], [_doc(tmp_path, "h2", 1.0, facts="h100-sxm-8x")]]).warnings == ()


def test_cli_columns_of_repeats_and_warning(cli: Callable[..., Any], tmp_path: Path) -> None:
    from cmx_core import paths
    from cmx_core.results import ResultStore, write_result

    store = ResultStore(paths.results_db())
    for run_id, value, facts in (("a1", 99.0, None), ("a2", 101.0, None), ("b1", 100.0, None),
                                 ("b2", 102.0, None), ("g1", 50.0, "l4-1x")):
        doc = _doc(tmp_path, run_id, value, facts=facts)
        store.index(doc, write_result(tmp_path / run_id, doc, suites=None))
    done = cli("results", "compare", "a1,a2", "b1,b2", "g1", "--json")
    assert done.code == 0, done.err
    data = json.loads(done.out)
    assert [r["repeats"] for r in data["runs"]] == [["a1", "a2"], ["b1", "b2"], ["g1"]]
    rate = next(m for m in data["metrics"] if m["name"] == "rate")
    assert [c["verdict"] for c in rate["cells"]] == ["baseline", "within noise", "other series"]
    assert [r["against"] for r in data["runs"]] == [None, "a1", None] and data["warnings"] == []
    across = json.loads(cli("results", "compare", "a1,a2", "b1,b2", "g1", "--across", "hardware", "--json").out)
    rate = next(m for m in across["metrics"] if m["name"] == "rate")
    assert [c["verdict"] for c in rate["cells"]] == ["baseline", "within noise", "worse"]
    assert len(across["warnings"]) == 1 and "hardware class" in across["warnings"][0]
    warned = cli("results", "compare", "a1,a2", "g1", "--across", "hardware")
    assert "warning:" in warned.err and "hardware class" in warned.err
    twice = cli("results", "compare", "a1,a1", "b1")
    assert twice.code == 2 and "named twice" in twice.err
    # --repeats: every stored run of the same lock digest and hardware class joins its column
    repeats = json.loads(cli("results", "compare", "a1", "g1", "--repeats", "--json").out)
    assert sorted(repeats["runs"][0]["repeats"]) == ["a1", "a2", "b1", "b2"] and repeats["runs"][1]["repeats"] == ["g1"]


@pytest.mark.parametrize(("before", "after", "verdict"), [
    ((100.0, 100.0), (100.0, 100.0), "reproduced"),
    ((100.0, 101.0, 102.0), (101.0, 102.0, 103.0), "reproduced"),   # the interval inside ±5%
    ((90.0, 100.0, 110.0), (108.0, 110.0, 112.0), "within noise"),  # the interval overlaps the band
    ((99.0, 100.0, 101.0), (150.0, 151.0, 152.0), "differs"),
    ((99.0, 100.0), (150.0, 151.0), "inconclusive"),                # 2 samples a side: too few
])
def test_replay_verdicts(tmp_path: Path, before: tuple[float, ...], after: tuple[float, ...], verdict: str) -> None:
    original = [_doc(tmp_path, f"o{i}", v) for i, v in enumerate(before)]
    replay = [_doc(tmp_path, f"r{i}", v) for i, v in enumerate(after)]
    judgement = judge(original, replay)
    rate = next(m for m in judgement.metrics if m.name == "rate")
    assert rate.verdict == verdict and rate.band is not None and rate.reason
    assert judgement.verdict == verdict and judgement.reason


def test_replay_on_another_hardware_class_is_not_comparable(tmp_path: Path) -> None:
    judgement = judge([_doc(tmp_path, "o", 1.0, facts="h100-sxm-8x")], [_doc(tmp_path, "r", 1.0, facts="l4-1x")])
    assert judgement.verdict == "not comparable"
    assert "hardware class" in judgement.reason and "accelerator h100 -> l4" in judgement.reason


def test_replay_not_comparable_and_noise_unknown(tmp_path: Path) -> None:
    units = judge([_doc(tmp_path, "o", 1.0)], [_doc(tmp_path, "r", 1.0, unit="ms")])
    assert units.verdict == "not comparable" and "unit" in units.metrics[0].reason
    missing = judge([_doc(tmp_path, "o", 1.0)], [_doc(tmp_path, "r", None)])
    assert missing.verdict == "not comparable"
    far = judge([_doc(tmp_path, "o", 100.0)], [_doc(tmp_path, "r", 200.0)])
    assert far.verdict == "inconclusive" and "at least 3" in far.metrics[0].reason  # never differs
    status = judge([_doc(tmp_path, "o", 1.0)], [_doc(tmp_path, "r", 1.0, status="invalid")])
    assert status.verdict == "differs" and "status" in status.reason


def _timed(tmp_path: Path, run_id: str, value: float, repetitions: tuple[float, ...]) -> dict[str, Any]:
    """A run that timed ``repetitions`` and reports ``value`` (its best) as the metric."""
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(value, "items/s", True, repetitions)})
    return example_document(tmp_path / run_id, run_id=run_id, part=part)


def test_a_runs_timed_repetitions_are_its_samples(tmp_path: Path) -> None:
    """One run a side, each timing 3 repetitions: the cells show the runs' own values with
    their repetitions' band (n = 3), and the verdict is judged on the repetitions."""
    base = _timed(tmp_path, "a", 101.0, (99.0, 100.0, 101.0))
    slower = _timed(tmp_path, "b", 82.0, (80.0, 81.0, 82.0))
    baseline, cell = _rate(compare_samples([[base], [slower]])).cells
    assert (baseline.value, baseline.samples, baseline.low, baseline.high) == (101.0, 3, 99.0, 101.0)
    assert (cell.value, cell.samples, cell.low, cell.high, cell.delta) == (82.0, 3, 80.0, 82.0, -19.0)
    assert cell.verdict == "worse" and cell.noise is not None and "beyond the noise" in cell.noise
    close = _timed(tmp_path, "c", 101.5, (98.0, 100.5, 101.5))
    assert _rate(compare_samples([[base], [close]])).cells[1].verdict == "within noise"
    once = _doc(tmp_path, "d", 82.0)  # a run that timed once, against the base's band: a single value vs a range
    assert _rate(compare_samples([[base], [once]])).cells[1].noise == "beyond the noise: 99..101 (3) vs 82..82 (1)"
    two_once = _rate(compare_samples([[_doc(tmp_path, "e", 100.0)], [once]])).cells[1]
    assert two_once.noise == NOISE_UNKNOWN  # neither side has a band


def test_the_demo_reports_its_repetitions_and_compare_shows_the_band(cli: Callable[..., Any]) -> None:
    runs = []
    for repeats in ("3", "1"):
        done = cli("run", "recipe", "--tags=demo,sort", "--size=2000", f"--repeats={repeats}", "--json")
        assert done.code == 0, done.err
        runs.append(json.loads(done.out))
    timed = runs[0]["metrics"]["items_per_second"]
    assert len(timed["samples"]) == 3 and timed["value"] == max(timed["samples"])  # the best of the 3
    assert "samples" not in runs[1]["metrics"]["items_per_second"]  # timed once: no samples key
    table = json.loads(cli("results", "compare", runs[0]["run_id"], runs[1]["run_id"], "--json").out)
    rate = next(m for m in table["metrics"] if m["name"] == "items_per_second")
    assert rate["cells"][0]["samples"] == 3 and rate["cells"][1]["samples"] == 1


def _sized(tmp_path: Path, run_id: str, size: int, rate: float, repeats: int = 3) -> dict[str, Any]:
    """A demo-sort-like run: ``size`` an input, ``items`` echoing it, ``rate`` a result."""
    part = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t", "primary_metric": "rate"},
                      metrics={"rate": Metric(rate, "items/s", True), "items": Metric(size, "items", True),
                               "repeats_done": Metric(repeats, "repetitions", True)})
    return example_document(tmp_path / run_id, run_id=run_id, part=part,
                            inputs={"size": size, "repeats": repeats}, variations={"builtin": True})


def test_an_input_and_its_echo_are_configuration_never_better_or_worse(tmp_path: Path) -> None:
    """``items`` echoes the ``size`` that differs between the runs: its cells say ``input``
    (no delta), the axis is named and each run's configuration is in the JSON; ``repeats``
    is echoed too but the same in both runs, so it is no axis and its row compares as usual."""
    comparison = compare_samples([[_sized(tmp_path, "a", 200_000, 100.0)], [_sized(tmp_path, "b", 20_000, 90.0)]])
    assert comparison.axes == ("size",)
    rows = {m.name: m for m in comparison.metrics}
    items = rows["items"].cells[1]
    assert (items.verdict, items.delta, rows["items"].higher_is_better) == ("input", None, None)
    assert items.noise == "the input size: configuration, not a result"
    # another size is another configuration: its rate is its own series, not "worse"
    assert rows["rate"].cells[1].verdict == "other series" and rows["rate"].cells[1].delta is None
    assert rows["rate"].cells[1].noise == "another configuration (size=20000): its own series, not a delta"
    across = {m.name: m for m in compare_samples([[_sized(tmp_path, "a", 200_000, 100.0)],
                                                  [_sized(tmp_path, "b", 20_000, 90.0)]], across=("size",)).metrics}
    assert across["rate"].cells[1].verdict == "worse" and across["repeats_done"].cells[1].verdict == "same"
    assert across["items"].cells[1].verdict == "input"           # compared across it, still no result
    data = comparison.to_json()
    assert data["axes"] == ["size"] and data["runs"][1]["config"] == {"size": 20_000, "repeats": 3,
                                                                      "variation.builtin": True}


def test_compare_names_what_changed_under_each_run(cli: Callable[..., Any], tmp_path: Path) -> None:
    from cmx_core import paths
    from cmx_core.results import ResultStore, write_result

    store = ResultStore(paths.results_db())
    for run_id, size, rate in (("s1", 200_000, 100.0), ("s2", 20_000, 90.0)):
        doc = _sized(tmp_path, run_id, size, rate)
        store.index(doc, write_result(tmp_path / run_id, doc, suites=None))
    done = cli("results", "compare", "s1", "s2")
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert any("size=200000" in line and "size=20000" in line for line in lines[:5])  # under each run's name
    items = next(line for line in lines if line.startswith("items"))
    assert items.rstrip().endswith("input") and "worse" not in items and "better" not in items
