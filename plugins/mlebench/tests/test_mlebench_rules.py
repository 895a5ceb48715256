"""The grading rules on hand-made leaderboards: the threshold table at its band edges,
lower-is-better inference, exclusive medals, ties, strict above-median, malformed
leaderboards, and the seed aggregate (mean ± SEM, missing seeds as failures)."""

from __future__ import annotations

import math

import pytest

from cmx_core.errors import ResultsError
from cmx_mlebench.aggregate import mean_sem, tally
from cmx_mlebench.leaderboard import Leaderboard, leaderboard_csv, parse_leaderboard
from cmx_mlebench.report import medals
from cmx_mlebench.thresholds import medal_positions, thresholds

# (teams, gold, silver, bronze) worked out by hand from the table in workloads.md §2.2
EDGES = [
    (1, 1, 1, 1),
    (9, 1, 1, 3),
    (99, 9, 19, 39),
    (100, 10, 20, 40),
    (249, 10, 49, 99),
    (250, 10, 50, 100),
    (999, 11, 50, 100),
    (1000, 12, 50, 100),
    (1999, 13, 99, 199),
    (5000, 20, 250, 500),
]


@pytest.mark.parametrize(("teams", "gold", "silver", "bronze"), EDGES)
def test_medal_positions_at_the_band_edges(teams: int, gold: int, silver: int, bronze: int) -> None:
    at = medal_positions(teams)
    assert (at.gold, at.silver, at.bronze) == (gold, silver, bronze)


def test_no_team_is_an_error() -> None:
    with pytest.raises(ResultsError, match="no team"):
        medal_positions(0)


def _board(scores: list[float]) -> Leaderboard:
    return Leaderboard(tuple(scores))


def test_thresholds_are_the_scores_at_the_positions() -> None:
    scores = [float(100 - i) for i in range(100)]  # 100 teams, best 100.0, higher is better
    limits = thresholds(_board(scores))
    assert (limits.gold, limits.silver, limits.bronze) == (91.0, 81.0, 61.0)  # positions 10, 20, 40
    assert limits.median == 50.5 and not limits.lower_is_better and limits.teams == 100


def test_lower_is_better_is_inferred_from_the_order() -> None:
    rising = [0.1 * i for i in range(1, 11)]  # best (lowest) first
    limits = thresholds(_board(rising))
    assert limits.lower_is_better
    assert limits.gold == pytest.approx(0.1) and limits.silver == pytest.approx(0.2)
    assert limits.bronze == pytest.approx(0.4)


def test_medals_are_exclusive_and_reached_at_the_threshold() -> None:
    limits = thresholds(_board([float(10 - i) for i in range(10)]))  # 10 teams: gold 10, silver 9, bronze 7
    assert (limits.gold, limits.silver, limits.bronze, limits.median) == (10.0, 9.0, 7.0, 5.5)
    gold = medals(10.0, limits)
    assert gold.gold and not gold.silver and not gold.bronze and gold.any
    silver = medals(9.0, limits)
    assert silver.silver and not silver.gold and not silver.bronze
    bronze = medals(7.5, limits)
    assert bronze.bronze and not bronze.silver
    none = medals(6.9, limits)
    assert not none.any and none.above_median


def test_above_median_is_strict_both_ways() -> None:
    high = thresholds(_board([4.0, 3.0, 2.0, 1.0]))  # median 2.5
    assert not medals(2.5, high).above_median and medals(2.50001, high).above_median
    low = thresholds(_board([1.0, 2.0, 3.0, 4.0]))
    assert not medals(2.5, low).above_median and medals(2.49999, low).above_median
    assert medals(1.0, low).gold and not medals(1.00001, low).gold


def test_ties_at_a_threshold_share_the_medal() -> None:
    limits = thresholds(_board([5.0, 5.0, 5.0, 4.0, 3.0, 3.0, 2.0, 1.0, 1.0, 0.0]))
    assert limits.gold == 5.0 and limits.silver == 5.0 and limits.bronze == 4.0
    assert medals(5.0, limits).gold and medals(4.0, limits).bronze


def test_a_missing_score_keeps_no_medal() -> None:
    limits = thresholds(_board([3.0, 2.0, 1.0]))
    won = medals(None, limits)
    assert not won.any and not won.above_median


def test_the_leaderboard_csv_round_trips_sorted_best_first() -> None:
    text = leaderboard_csv([("a", 0.5), ("b", 0.9), ("c", 0.7)], lower_is_better=False)
    board = parse_leaderboard(text, "lb.csv")
    assert board.scores == (0.9, 0.7, 0.5) and not board.lower_is_better
    text = leaderboard_csv([("a", 0.5), ("b", 0.9), ("c", 0.7)], lower_is_better=True)
    assert parse_leaderboard(text, "lb.csv").scores == (0.5, 0.7, 0.9)


@pytest.mark.parametrize(("text", "message"), [
    ("", "'score' column"),
    ("team,points\na,1\n", "'score' column"),
    ("score\n", "'score' column"),
    ("score\n1\nabc\n", "lb.csv:3: score 'abc'"),
    ("score\n1\nnan\n", "not a finite number"),
    ("score\n3\n1\n2\n", "lb.csv:4: the leaderboard is not sorted"),
])
def test_a_malformed_leaderboard_is_one_line_naming_the_row(text: str, message: str) -> None:
    with pytest.raises(ResultsError, match=message) as caught:
        parse_leaderboard(text, "lb.csv")
    assert "\n" not in str(caught.value)


def test_mean_and_sem_over_seeds() -> None:
    stats = mean_sem([100.0, 0.0, 50.0])
    assert stats.mean == 50.0 and stats.sem == pytest.approx(50.0 / math.sqrt(3)) and stats.n == 3
    one = mean_sem([100.0])
    assert one.mean == 100.0 and one.sem is None and "one seed" in str(one.sem_reason)


def test_a_missing_competition_counts_as_a_failure_for_its_seed() -> None:
    reports = {"a": {"any_medal": True, "valid_submission": True}, "b": {"any_medal": False}}
    seed = tally(0, ["a", "b", "c", "d"], reports)
    assert seed.pct(seed.any_medal) == 25.0 and seed.missing == ("c", "d") and seed.valid == 1
