"""Noise-aware replay (#35 a): a replay repeats the measurement (at least 3 times, or as often
as the original did), judges the two distributions by the named bootstrap rule, answers
reproduced / within noise / inconclusive / differs / not comparable with an effect size and an
interval, and ``--check`` makes ``differs`` exit 1. The planted change is a deterministic
stand-in metric (a shell step reads its cost from a file), so no test depends on machine speed.
Its unit is an abstract cost, not seconds: a change of a timing on a busy machine (this one
under a test run) is held back as inconclusive by its conditions (tests/test_verdict_conditions.py),
while a change of a quantity that load does not move is judged on its numbers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.results.noise import MIN_SAMPLES, RULE, judge_noise

RECIPE = """
name: planted
version: "1.0"
tags: [planted]
summary: a cost read from a file, a stand-in for a measured quantity
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["cat", "{cost}"]
      metrics:
        cost_s: {{kv: COST, unit: cost units, higher_is_better: false}}
"""


def _original(cli: Callable[..., Any], recipes: Any, tmp_path: Path, costs: list[float]) -> tuple[Path, list[str]]:
    """Runs of the planted recipe, one per cost, bundled; returns the bundle and run ids."""
    cost = tmp_path / "cost.txt"
    recipes("planted", RECIPE.format(cost=cost))
    runs = []
    for value in costs:
        cost.write_text(f"COST={value}\n")
        done = cli("run", "recipe", "--tags=planted", "--recipes", recipes.dir, "--json")
        assert done.code == 0, done.err
        runs.append(json.loads(done.out)["run_id"])
    bundle = tmp_path / "planted.tar.gz"
    assert cli("bundle", "create", *runs, "-o", bundle).code == 0
    return bundle, runs


def test_a_planted_3x_change_differs_and_check_exits_1(cli: Callable[..., Any], recipes: Any,
                                                          tmp_path: Path) -> None:
    bundle, _ = _original(cli, recipes, tmp_path, [1.0, 1.01, 0.99])
    (tmp_path / "cost.txt").write_text("COST=3.0\n")
    done = cli("bundle", "replay", bundle, "--check", "--json")
    assert done.code == 1, done.err
    report = json.loads(done.out)
    assert report["verdict"] == "differs" and len(report["replays"]) == 3
    [comparison] = report["comparisons"]
    assert comparison["rule"] == RULE and "bootstrap" in RULE
    cost = next(m for m in comparison["metrics"] if m["name"] == "cost_s")
    assert cost["verdict"] == "differs" and cost["effect"] == pytest.approx(2.0)
    low, high = cost["interval"]
    assert 1.9 < low <= high < 2.1 and cost["original"]["samples"] == cost["replay"]["samples"] == 3
    plain = cli("bundle", "replay", bundle)
    assert plain.code == 0 and "differs" in plain.out and "bootstrap" in plain.out  # no --check: exit 0


def test_an_unchanged_replay_is_reproduced_and_grouped_with_its_original(
        cli: Callable[..., Any], recipes: Any, tmp_path: Path) -> None:
    bundle, runs = _original(cli, recipes, tmp_path, [1.0, 1.0, 1.0, 1.0])
    done = cli("bundle", "replay", bundle, "--check", "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["verdict"] == "reproduced" and len(report["replays"]) == 4  # as often as the original
    replays = [r["replay"] for r in report["replays"]]
    stored = json.loads(cli("results", "show", replays[0], "--json").out)
    assert stored["provenance"]["replay_of"]["run_id"] == runs[0]
    grouped = json.loads(cli("results", "compare", runs[0], "--repeats", "--json").out)
    assert sorted(grouped["runs"][0]["repeats"]) == sorted(runs)
    assert sorted(grouped["runs"][1]["repeats"]) == sorted(replays)
    both = json.loads(cli("results", "compare", runs[0], replays[0], "--repeats", "--json").out)
    assert [len(r["repeats"]) for r in both["runs"]] == [4, 4]


def test_repeats_are_settable_and_too_few_are_inconclusive(cli: Callable[..., Any], recipes: Any,
                                                           tmp_path: Path) -> None:
    bundle, _ = _original(cli, recipes, tmp_path, [1.0])
    (tmp_path / "cost.txt").write_text("COST=3.0\n")
    done = cli("bundle", "replay", bundle, "--repeats", "2", "--check", "--json")
    assert done.code == 0, done.err  # one original sample: never "differs"
    [comparison] = json.loads(done.out)["comparisons"]
    assert comparison["verdict"] == "inconclusive" and len(comparison["replay_runs"]) == 2
    assert f"at least {MIN_SAMPLES}" in comparison["reason"]
    bad = cli("bundle", "replay", bundle, "--repeats", "0")
    assert bad.code == 2 and len(bad.err_lines) == 1 and "--repeats" in bad.err


def test_the_compare_table_shows_the_noise_note(cli: Callable[..., Any], recipes: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _, runs = _original(cli, recipes, tmp_path, [1.0, 2.0])
    monkeypatch.setenv("COLUMNS", "250")
    done = cli("results", "compare", runs[0], runs[1])
    # a note is wrapped in its column (a conditions note on a busy machine runs long): read it whole
    assert done.code == 0 and "1 sample, noise unknown" in " ".join(line.strip() for line in done.out.splitlines())


@pytest.mark.parametrize(("before", "after", "verdict"), [
    ((100.0, 100.0, 100.0), (100.0, 100.0, 100.0), "reproduced"),
    ((100.0, 101.0, 102.0), (101.0, 102.0, 103.0), "reproduced"),
    ((90.0, 100.0, 110.0), (100.0, 108.0, 116.0), "within noise"),
    ((99.0, 100.0, 101.0), (297.0, 300.0, 303.0), "differs"),
    ((99.0, 100.0, 101.0), (33.0, 34.0, 35.0), "differs"),
    ((100.0,), (300.0, 301.0, 302.0), "inconclusive"),
    ((100.0, 101.0), (300.0, 301.0), "inconclusive"),
    ((7.0,), (7.0,), "reproduced"),  # a deterministic metric needs no repeats
    ((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), "within noise"),
])
def test_the_rule(before: tuple[float, ...], after: tuple[float, ...], verdict: str) -> None:
    judged = judge_noise(before, after, 0.05)
    assert judged.verdict == verdict and judged.reason
    assert judge_noise(before, after, 0.05) == judged  # seeded: the same samples, the same answer
