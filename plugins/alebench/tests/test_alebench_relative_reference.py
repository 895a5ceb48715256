"""Relative scoring and its rank against a transcription of ALE-Bench's own code: generated
standings of every class (ties, rejected rows, totals of 0, large M, all four types), 0 differences.

``reference_recalculate`` and ``reference_rank`` below are a short transcription of ALE-Bench's
``RelativeResults.recalculate_relative_score`` and the relative branch of ``Standings.get_new_rank``
(src/ale_bench/data.py, github.com/SakanaAI/ALE-Bench): they are the REFERENCE the test holds cmx
to, not cmx's code. Cases where the reference itself fails (a ``max`` case whose accepted scores
are all 0, an accepted 0 on a ``min`` case) are generated apart and checked to score 0 in cmx.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from cmx_alebench.evaluate import rate
from cmx_alebench.judge import CaseResult, Evaluation
from cmx_alebench.problem import Problem, load_problem, shipped_dir
from cmx_alebench.relative import Contestants, rescale
from cmx_alebench.scoring import RelativeType, relative_score
from cmx_alebench.standings import load_standings
from cmx_alebench.verdicts import JudgeResult

# ---- REFERENCE: transcribed from ALE-Bench (src/ale_bench/data.py); -1 is a rejected case ----


def reference_recalculate(kind: str, max_score: int, absolute_scores: list[list[int]],
                          new_scores: list[int]) -> tuple[int, list[int], list[int]]:
    """ALE-Bench's ``recalculate_relative_score``: ``absolute_scores`` is one list per case."""
    new_relative_case_scores = []
    existing_totals = [0 for _ in range(len(absolute_scores[0]))]
    for new_score, existing_scores in zip(new_scores, absolute_scores, strict=True):
        case_scores = list(existing_scores)
        case_scores.append(-1 if new_score < 0 else new_score)
        sorted_case_scores = sorted([s for s in case_scores if s >= 0])
        for user_idx, user_score in enumerate(case_scores):
            relative = 0
            if kind == "max":
                if user_score >= 0:
                    relative = max_score * user_score // sorted_case_scores[-1]
                    if max_score * user_score % sorted_case_scores[-1] * 2 >= sorted_case_scores[-1]:
                        relative += 1
            elif kind == "min":
                if user_score == 0:
                    raise ValueError("zero score on a min problem")
                elif user_score > 0:
                    relative = max_score * sorted_case_scores[0] // user_score
                    if max_score * sorted_case_scores[0] % user_score * 2 >= user_score:
                        relative += 1
            elif user_score >= 0:
                n_submit, n_lose, n_tie = len(case_scores), 0, -1
                for abs_score in sorted_case_scores:
                    if user_score == abs_score:
                        n_tie += 1
                    elif user_score < abs_score and kind == "rank_max":  # noqa: SIM114 (as transcribed)
                        n_lose += 1
                    elif user_score > abs_score and kind == "rank_min":
                        n_lose += 1
                relative = round(max_score * (1.0 - (n_lose + n_tie / 2) / n_submit))
            if user_idx == len(existing_scores):
                new_relative_case_scores.append(relative)
            else:
                existing_totals[user_idx] += relative
    new_total = sum(new_relative_case_scores)
    return new_total, new_relative_case_scores, sorted([*existing_totals, new_total], reverse=True)


def reference_rank(new_total: int, all_totals: list[int], zero_rank: int) -> tuple[int, float]:
    """The relative branch of ALE-Bench's ``get_new_rank``: (rank, rank for the performance)."""
    if new_total == 0:
        return zero_rank, float(zero_rank)
    new_rank, performance_additional = 1, 0.0
    for score in all_totals:
        if new_total > score:
            break
        elif new_total == score:
            performance_additional += 0.5
        else:
            new_rank += 1
    return new_rank, float(new_rank) + max(performance_additional - 1.0, 0.0)

# ---- end of the reference ----


KINDS = ("max", "min", "rank_max", "rank_min")


def _score(rng: random.Random, kind: str, spread: int, reject: float) -> int:
    if rng.random() < reject:
        return -1
    low = 1 if kind == "min" else 0
    return rng.randint(low, spread)


def _instance(rng: random.Random) -> tuple[str, int, list[list[int]], list[int], int]:
    kind = rng.choice(KINDS)
    max_score = rng.choice([100, 1000, 10**6, 10**9, 10**9, rng.randint(1, 10**9)])
    contestants, cases = rng.randint(1, 12), rng.randint(1, 5)
    spread = rng.choice([1, 3, 10, 1000, 10**9])        # small spreads: ties everywhere
    reject = rng.choice([0.0, 0.1, 0.5, 0.9])
    table = [[_score(rng, kind, spread, reject) for _ in range(contestants)] for _ in range(cases)]
    if kind == "max":   # at least one positive accepted score a case: the reference divides by the best
        for column in table:
            if all(s <= 0 for s in column):
                column[rng.randrange(contestants)] = rng.randint(1, spread)
    ours = [_score(rng, kind, spread, reject if rng.random() < 0.5 else 1.0) for _ in range(cases)]
    return kind, max_score, table, ours, rng.randint(contestants + 1, contestants + 50)


def _cmx(kind: str, max_score: int, table: list[list[int]], ours: list[int], zero_rank: int
         ) -> tuple[int, list[int], list[int], tuple[int, float]]:
    rows = tuple(tuple(None if table[c][p] < 0 else table[c][p] for c in range(len(table)))
                 for p in range(len(table[0])))
    scaled = rescale(RelativeType(kind), max_score, [None if s < 0 else s for s in ours], Contestants(rows))
    spot = scaled.placement(zero_rank)
    every = sorted([*scaled.others, scaled.total], reverse=True)
    return scaled.total, [s or 0 for s in scaled.ours], every, (spot.rank, spot.rank_for_performance)


def test_generated_relative_standings_match_alebench_with_0_differences() -> None:
    rng = random.Random(47)
    differences, classes = [], {"tie": 0, "rejected": 0, "zero_total": 0, "large_m": 0}
    compared = 0
    while compared < 6000:
        kind, max_score, table, ours, zero_rank = _instance(rng)
        total, per_case, every = reference_recalculate(kind, max_score, table, ours)
        expected = (total, per_case, every, reference_rank(total, every, zero_rank))
        got = _cmx(kind, max_score, table, ours, zero_rank)
        compared += 1
        if got != expected:
            differences.append((kind, max_score, table, ours, expected, got))
        classes["tie"] += len(set(every)) < len(every)
        classes["rejected"] += any(s < 0 for column in table for s in column)
        classes["zero_total"] += total == 0
        classes["large_m"] += max_score == 10**9
    assert differences == [], differences[:3]
    assert all(classes[c] > 200 for c in ("tie", "rejected", "zero_total", "large_m")), classes


def test_each_issue_example_class() -> None:
    # rejected contestants count in n: M=100, others 10, 20 and one rejected, ours 15 -> 75 (not 67)
    assert relative_score(RelativeType.RANK_MAX, 15, [10, 20], 100, rejected=1) == 75
    assert reference_recalculate("rank_max", 100, [[10, 20, -1]], [15])[0] == 75
    # rounding half to even for rank types: 62.5 -> 62
    assert relative_score(RelativeType.RANK_MAX, 5, [10, 5, 1], 100) == 62    # 100 (1 - (1 + 1/2) / 4) = 62.5
    assert reference_recalculate("rank_max", 100, [[10, 5, 1]], [5])[0] == 62
    assert relative_score(RelativeType.RANK_MAX, 5, [10, 5], 100, rejected=1) == 62
    # a total of 0 takes the standings file's score-0 row
    rows = ((0,), (0,), (7,))
    scaled = rescale(RelativeType.MAX, 100, [0], Contestants(rows))
    assert scaled.total == 0 and scaled.placement(40).rank == 40


# M·s/best for M = 10^9, s = 38254217, best = 123456791 is 309859155 + 61728395/123456791: just
# below a half, and 309859155.5 in floating point (which rounded half up gives 309859156)
NEAR_HALF = (38254217, 123456791)


def test_max_and_min_round_in_exact_integers_with_large_m() -> None:
    s, best = NEAR_HALF
    exact = 10**9 * s // best                   # the remainder is below a half: ALE-Bench keeps it
    assert exact == 309859155 and 10**9 * s / best == 309859155.5
    assert relative_score(RelativeType.MAX, s, [best], 10**9) == exact
    assert reference_recalculate("max", 10**9, [[best]], [s])[0] == exact
    assert relative_score(RelativeType.MIN, best, [s], 10**9) == exact


@pytest.mark.parametrize(("kind", "column", "ours"), [
    ("max", [0, 0, -1], 0),        # every accepted score 0: the reference divides by zero
    ("min", [0, 5], 7),            # an accepted 0 on a min case: the reference stops
])
def test_cases_where_alebench_fails_score_0_in_cmx(kind: str, column: list[int], ours: int) -> None:
    with pytest.raises((ZeroDivisionError, ValueError)):
        reference_recalculate(kind, 100, [column], [ours])
    rows = tuple((None if s < 0 else s,) for s in column)
    assert rescale(RelativeType(kind), 100, [ours], Contestants(rows)).ours == (0,)


def _relative_copy(tmp_path: Path) -> Problem:
    root = tmp_path / "cmx001"
    shutil.copytree(shipped_dir() / "cmx001", root)
    data = json.loads((root / "data.json").read_text())
    data["metadata"].update({"relative_score_type": "rank_max", "relative_max_score": 100})
    (root / "data.json").write_text(json.dumps(data))
    cases = len(load_problem(root).seed_list("private", False))
    header = ",".join(f"private_{i}" for i in range(cases))
    (root / "relative_results.csv").write_text(f"{header}\n" + ",".join(["5"] * cases) + "\n"
                                                + ",".join(["-1"] * cases) + "\n")
    return load_problem(root)


def _evaluation(verdicts: list[JudgeResult], score: int) -> Evaluation:
    cases = tuple(CaseResult(i, v, score if v is JudgeResult.ACCEPTED else 0, 0.1, 1, "")
                  for i, v in enumerate(verdicts))
    worst = JudgeResult.ACCEPTED if all(v is JudgeResult.ACCEPTED for v in verdicts) else JudgeResult.WRONG_ANSWER
    return Evaluation("private", worst, 0, cases, False, "")


def test_rating_a_relative_total_of_0_takes_the_standings_score_0_rank(tmp_path: Path) -> None:
    problem = _relative_copy(tmp_path)
    n = len(problem.seed_list("private", False))
    zero_row = load_standings(problem.standings_path(False))[-1].first
    rated = rate(problem, _evaluation([JudgeResult.WRONG_ANSWER] * n, 0), 0, False)
    assert rated.evaluation.relative_score == 0 and rated.rank == zero_row == 31   # not 3, a re-rank of 2 + us


def test_rating_ranks_by_the_accepted_cases_even_when_not_ac(tmp_path: Path) -> None:
    """ALE-Bench's get_new_rank sums the accepted cases' relative scores whatever the verdict;
    the reported overall relative score is 0 (not AC, no allow_score_non_ac)."""
    problem = _relative_copy(tmp_path)
    n = len(problem.seed_list("private", False))
    # case 0 accepted with 9 > 5: better 0, tied 0, n = 3 -> round(100 * 1.0) = 100; the rest rejected
    rated = rate(problem, _evaluation([JudgeResult.ACCEPTED] + [JudgeResult.WRONG_ANSWER] * (n - 1), 9), 0, False)
    assert rated.evaluation.relative_score == 0 and rated.evaluation.cases[0].relative_score == 100
    # the contestant with 5 everywhere: case 0 -> round(100 * (1 - 1/3)) = 67, others round(100 * (1 - 0)) = 100
    assert rated.rank == 2
