"""Rank and performance (§3.5) against standings computed by hand, ties included."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_alebench.standings import Group, load_performance, load_standings, place
from cmx_core.errors import UsageError


def _csv(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def groups(tmp_path: Path) -> tuple[Group, ...]:
    # ranks 1..7: 900, 800, 800, 800, 500, 100, 0
    return load_standings(_csv(tmp_path, "s.csv", "rank,score\n1,900\n2,800\n3,800\n4,800\n5,500\n6,100\n7,0\n"))


def test_standings_are_grouped_by_score(groups: tuple[Group, ...]) -> None:
    assert groups == (Group(900, 1, 1), Group(800, 2, 4), Group(500, 5, 5), Group(100, 6, 6), Group(0, 7, 7))


@pytest.mark.parametrize(("total", "rank", "for_performance"), [
    (1000, 1, 1.0),   # above everyone: the first group's first rank
    (900, 1, 1.0),    # equal to a one-row group
    (850, 2, 2.0),    # between 900 and 800: the first group below gives its first rank
    (800, 2, 3.0),    # a tie with ranks 2-4: rank 2, performance at the mean rank 3
    (600, 5, 5.0),
    (100, 6, 6.0),
    (1, 7, 7.0),      # beats only the score-0 row
    (0, 7, 7.0),      # a total of 0 gets the last rank
])
def test_place_by_hand(groups: tuple[Group, ...], total: int, rank: int, for_performance: float) -> None:
    spot = place(total, groups)
    assert (spot.rank, spot.rank_for_performance) == (rank, for_performance)


def test_performance_keys_are_range_midpoints_and_interpolate(tmp_path: Path) -> None:
    # rows: rank 1 -> 2800 (covers 1), rank 2 -> 2400 (covers 2..5, key 3.5), rank 6 -> 1600 (covers 6..9,
    # key 7.5), rank 10 -> 0 (the last row keeps its own rank: key 10)
    table = load_performance(_csv(tmp_path, "p.csv", "rank,performance\n1,2800\n2,2400\n6,1600\n10,0\n"))
    assert table.keys == (1.0, 3.5, 7.5, 10.0)
    assert table.performance(3.5) == 2400                 # an exact key
    assert table.performance(2) == 2640                   # 2800 + (2400-2800) * (1/2.5) = 2640
    assert table.performance(5) == 2100                   # 2400 + (1600-2400) * (1.5/4) = 2100
    assert table.performance(9) == 640                    # 1600 + (0-1600) * (1.5/2.5) = 1600 - 960
    # below the first key: extrapolated from keys 1 and 3.5, 2800 + (2400-2800) * (-0.5/2.5) = 2880
    assert table.performance(0.5) == 2880
    with pytest.raises(UsageError, match=r"p\.csv: rank 11 is beyond the table's last rank 10"):
        table.performance(11)             # above the last key: an error, as in ALE-Bench


def test_tie_averaging_changes_performance_not_rank(tmp_path: Path) -> None:
    groups = load_standings(_csv(tmp_path, "s.csv", "rank,score\n1,50\n2,40\n3,40\n4,40\n5,0\n"))
    table = load_performance(_csv(tmp_path, "p.csv", "rank,performance\n1,2000\n2,1800\n3,1600\n4,1400\n5,0\n"))
    spot = place(40, groups)
    assert spot.rank == 2
    assert table.performance(spot.rank_for_performance) == 1600   # rank 3's value, not rank 2's 1800


def test_the_shipped_standings_by_hand() -> None:
    from cmx_alebench.problem import find_problem

    problem = find_problem("cmx001", [])
    groups = load_standings(problem.standings_path(False))
    table = load_performance(problem.root / "performance.csv")
    tie = place(239477, groups)               # the three synthetic rows at ranks 24-26
    assert (tie.rank, tie.rank_for_performance) == (24, 25.0)
    assert table.performance(25.0) == 1000   # rank 24 covers 24..26: its key is 25
    between = place(1210000, groups)          # below 1230000 (rank 12), above 1200000 (rank 13)
    assert between.rank == 13
    assert table.performance(13) == 1825     # keys 9.5 -> 2000 and 13.5 -> 1800: 2000 - 200 * 3.5/4


@pytest.mark.parametrize(("text", "fragment"), [
    ("rank,points\n1,5\n2,0\n", "missing column(s) score"),
    ("rank,score\n1,five\n2,0\n", "not a number"),
    ("rank,score\n1,5\n2,3\n", "last row must have score 0"),
    ("rank,score\n", "no rows"),
    ("rank,score\n1,5\n2,7\n3,0\n", "ranks must ascend and scores descend"),    # ascending: refused
    ("rank,score\n2,7\n1,5\n3,0\n", "ranks must ascend and scores descend"),
    ("rank,score\n1,5\n2,0\n3,0\n", "only the last row may have score 0"),
])
def test_malformed_standings_are_one_line_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = _csv(tmp_path, "standings_scores.csv", text)
    with pytest.raises(UsageError, match=r"standings_scores\.csv") as info:
        load_standings(path)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_unsorted_performance_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="sort the rows"):
        load_performance(_csv(tmp_path, "p.csv", "rank,performance\n5,100\n1,200\n"))


def test_one_rank_with_two_performances_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"p\.csv: rank 2 has performances 1800 and 1700"):
        load_performance(_csv(tmp_path, "p.csv", "rank,performance\n1,2000\n2,1800\n2,1700\n3,0\n"))


# Hand-checked rows of issue 32 (each computed on paper from §3.5; the comment says how).
ISSUE_STANDINGS = ("rank,score\n1,100000\n2,95000\n3,90000\n4,88000\n5,85000\n5,85000\n7,80000\n"
                   "8,70000\n8,70000\n10,50000\n11,0\n")
# keys: rank 1 -> 1.5 (next rank 3), 3 -> 3, 4 -> 4.5, 6 -> 6.5, 8 -> 8, 9 -> 9, 10 -> 10, 11 (last) -> 11
ISSUE_PERFORMANCE = ("rank,performance\n1,3000\n3,2601\n4,2434\n6,2166\n8,1851\n9,1850\n10,1000\n"
                     "11,0\n")


@pytest.mark.parametrize(("total", "rank", "for_performance", "performance"), [
    # a new best: rank 1, extrapolated from keys 1.5 and 3: 3000 + (2601-3000) * (1-1.5)/1.5 = 3133
    # (a clamp at the table's top gave 3000)
    (120000, 1, 1.0, 3133),
    (100000, 1, 1.0, 3133),   # equal to the best, a one-row group 1..1
    (95000, 2, 2.0, 2867),    # 3000 - 399 * 0.5/1.5
    # the two rows at rank 5 are followed by rank 7: the group is 5..6, its mid-rank 5.5:
    # 2434 + (2166-2434) * 1/2 = 2300 (the group 5..5 of the printed ranks gave 2367)
    (85000, 5, 5.5, 2300),
    (86000, 5, 5.0, 2367),    # beats the tie: rank 5 itself, 2434 - 268 * 0.5/2
    (82000, 7, 7.0, 2061),    # 2166 + (1851-2166) * 0.5/1.5 = 2166 - 105
    (75000, 8, 8.0, 1851),    # an exact key
    # the tie at rank 8 (then 10) is the group 8..9, mid-rank 8.5 between keys 8 and 9: 1850.5, which
    # Python's round() takes to 1850 (half up gave 1851)
    (70000, 8, 8.5, 1850),
    (60000, 10, 10.0, 1000),
    (5, 11, 11.0, 0),         # five points beat only the score-0 row (the removed minimize branch gave rank 1)
    (0, 11, 11.0, 0),
])
def test_issue_rows_by_hand(tmp_path: Path, total: int, rank: int, for_performance: float, performance: int) -> None:
    groups = load_standings(_csv(tmp_path, "standings_scores.csv", ISSUE_STANDINGS))
    table = load_performance(_csv(tmp_path, "performance.csv", ISSUE_PERFORMANCE))
    spot = place(total, groups)
    assert (spot.rank, spot.rank_for_performance) == (rank, for_performance)
    assert table.performance(spot.rank_for_performance) == performance


def test_issue_groups_end_at_the_next_groups_start(tmp_path: Path) -> None:
    groups = load_standings(_csv(tmp_path, "standings_scores.csv", ISSUE_STANDINGS))
    assert groups[4] == Group(85000, 5, 6) and groups[6] == Group(70000, 8, 9) and groups[-1] == Group(0, 11, 11)


@pytest.mark.parametrize(("table", "rank", "performance"), [
    ("rank,performance\n10,1851\n11,1850\n12,0\n", 10.5, 1850),   # 1850.5: half to even gives 1850
    ("rank,performance\n10,1852\n11,1851\n12,0\n", 10.5, 1852),   # 1851.5: half to even gives 1852
    ("rank,performance\n10,1852\n11,1851\n12,0\n", 10.25, 1852),  # 1851.75
])
def test_half_to_even(tmp_path: Path, table: str, rank: float, performance: int) -> None:
    assert load_performance(_csv(tmp_path, "p.csv", table)).performance(rank) == performance


def test_a_minimize_problem_is_ranked_like_a_maximize_one(tmp_path: Path) -> None:
    """score_type: minimize changes nothing in the ranking (ALE-Bench has no lower-is-better
    branch): five points on cmx001's tables beat only the score-0 row, as for maximize."""
    import json
    import shutil

    from cmx_alebench.evaluate import rate
    from cmx_alebench.judge import CaseResult, summarize
    from cmx_alebench.problem import load_problem, shipped_dir
    from cmx_alebench.verdicts import JudgeResult

    root = tmp_path / "cmx001"
    shutil.copytree(shipped_dir() / "cmx001", root)
    data = json.loads((root / "data.json").read_text())
    evaluation = summarize("private", [CaseResult(1000, JudgeResult.ACCEPTED, 5, 0.1, None, "")], True)
    ranks = {}
    for score_type in ("maximize", "minimize"):
        data["metadata"]["score_type"] = score_type
        (root / "data.json").write_text(json.dumps(data))
        rated = rate(load_problem(root), evaluation, 0, False)
        ranks[score_type] = (rated.rank, rated.performance)
    assert ranks["minimize"] == ranks["maximize"] == (31, 0)   # the score-0 row's rank 31, performance 0
