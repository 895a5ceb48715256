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
    [warning] = comparison.warnings
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
    assert [c["verdict"] for c in rate["cells"]] == ["baseline", "within noise", "worse"]
    assert "warning:" in done.err and "hardware class" in done.err and len(data["warnings"]) == 1
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
