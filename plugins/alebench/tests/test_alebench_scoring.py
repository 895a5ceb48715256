"""Verdict priority, the overall score, relative scoring of all four types, the tester protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_alebench.judge import CaseResult, summarize
from cmx_alebench.relative import Contestants, load_contestants, rescale
from cmx_alebench.scoring import RelativeType, overall_absolute, relative_score
from cmx_alebench.standings import Group
from cmx_alebench.tools import read_reactive_tester, read_tester
from cmx_alebench.verdicts import PRIORITY, JudgeResult, overall
from cmx_core.errors import UsageError

J = JudgeResult


def test_priority_order_is_alebenchs() -> None:
    assert [v.value for v in PRIORITY] == ["INTERNAL_ERROR", "WRONG_ANSWER", "RUNTIME_ERROR", "TIME_LIMIT_EXCEEDED",
                                           "MEMORY_LIMIT_EXCEEDED", "OUTPUT_LIMIT_EXCEEDED", "COMPILATION_ERROR"]


@pytest.mark.parametrize(("cases", "expected"), [
    ([J.ACCEPTED, J.ACCEPTED], J.ACCEPTED),
    ([J.ACCEPTED, J.OUTPUT_LIMIT_EXCEEDED, J.MEMORY_LIMIT_EXCEEDED], J.MEMORY_LIMIT_EXCEEDED),
    ([J.TIME_LIMIT_EXCEEDED, J.MEMORY_LIMIT_EXCEEDED], J.TIME_LIMIT_EXCEEDED),
    ([J.TIME_LIMIT_EXCEEDED, J.RUNTIME_ERROR], J.RUNTIME_ERROR),
    ([J.RUNTIME_ERROR, J.WRONG_ANSWER, J.ACCEPTED], J.WRONG_ANSWER),
    ([J.WRONG_ANSWER, J.INTERNAL_ERROR], J.INTERNAL_ERROR),
    ([J.OUTPUT_LIMIT_EXCEEDED, J.COMPILATION_ERROR], J.OUTPUT_LIMIT_EXCEEDED),
    ([], J.ACCEPTED),
])
def test_overall_verdict_is_the_worst(cases: list[JudgeResult], expected: JudgeResult) -> None:
    assert overall(cases) is expected


def _cases(*pairs: tuple[JudgeResult, int]) -> list[CaseResult]:
    return [CaseResult(i, v, s, 0.1, 1, "") for i, (v, s) in enumerate(pairs)]


def test_overall_score_rules() -> None:
    ok = summarize("public", _cases((J.ACCEPTED, 10), (J.ACCEPTED, 5)), allow_non_ac=False)
    assert (ok.judge_result, ok.absolute_score) == (J.ACCEPTED, 15)
    mixed = _cases((J.ACCEPTED, 10), (J.TIME_LIMIT_EXCEEDED, 0), (J.ACCEPTED, 7))
    assert summarize("private", mixed, allow_non_ac=False).absolute_score == 0   # not AC: 0
    assert summarize("private", mixed, allow_non_ac=True).absolute_score == 17   # AC cases only
    assert overall_absolute(J.INTERNAL_ERROR, [(J.ACCEPTED, 9)], allow_non_ac=True) == 0
    assert overall_absolute(J.COMPILATION_ERROR, [(J.ACCEPTED, 9)], allow_non_ac=True) == 0


def test_relative_max_and_min_round_half_up() -> None:
    # max: M * s / best; 100 * 50 / 80 = 62.5 -> 63
    assert relative_score(RelativeType.MAX, 50, [80, 20], 100) == 63
    assert relative_score(RelativeType.MAX, 90, [80, 20], 100) == 100
    # min: M * best / s; 100 * 20 / 80 = 25
    assert relative_score(RelativeType.MIN, 80, [20, 50], 100) == 25
    assert relative_score(RelativeType.MIN, 10, [20, 50], 100) == 100


def test_relative_rank_types_count_better_and_half_the_ties() -> None:
    # others 100, 80, 80; ours 80 (n = 4): better 1, tied 2 -> 1 - (1 + 1)/4 = 0.5
    assert relative_score(RelativeType.RANK_MAX, 80, [100, 80, 80], 1000) == 500
    # rank_min: lower is better; ours 80 among 100, 80, 80 -> better 0, tied 2 -> 1 - 1/4
    assert relative_score(RelativeType.RANK_MIN, 80, [100, 80, 80], 1000) == 750
    assert relative_score(RelativeType.RANK_MAX, 200, [100, 80], 1000) == 1000


def test_rescale_reranks_everyone_with_rejected_cells_left_out(tmp_path: Path) -> None:
    path = tmp_path / "relative_results.csv"
    path.write_text("private_0,private_1\n100,50\n50,-1\n")   # contestant 2 was rejected on case 1
    field = load_contestants(path, 2)
    assert field == Contestants(((100, 50), (50, None)))
    scaled = rescale(RelativeType.MAX, 1000, [80, 100], field)
    # case 0: best 100 -> ours 800; case 1: best 100 (ours) -> ours 1000, contestant 1: 500
    assert scaled.ours == (800, 1000) and scaled.total == 1800
    # contestant 1: 1000 + 500 = 1500; contestant 2: 500 + rejected
    assert scaled.standings == (Group(1500, 1, 1), Group(500, 2, 2), Group(0, 3, 3))


def test_an_empty_cell_is_rejected_too(tmp_path: Path) -> None:
    path = tmp_path / "relative_results.csv"
    path.write_text("private_0,private_1\n100,\n")
    assert load_contestants(path, 2) == Contestants(((100, None),))


def test_relative_results_missing_column_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "relative_results.csv"
    path.write_text("private_0\n5\n")
    with pytest.raises(UsageError, match="private_1"):
        load_contestants(path, 2)


@pytest.mark.parametrize(("stderr", "exit_code", "score", "wa"), [
    (b"debug\nScore = 1234\n", 0, 1234, None),
    (b"Score = 5\n\n", 0, 5, None),
    (b"Score = 5\ntrailing\n", 0, None,                            # a line after the score line: WA
     "the tester printed a line after its 'Score = N' line: trailing"),
    (b"wrong answer: x < 0\nScore = 5\n", 0, None, "wrong answer: x < 0\nScore = 5"),   # exit 0 and a score: WA
    (b"Score = -5\n", 0, None, "the tester printed no 'Score = N' line: Score = -5"),   # a negative score: WA
    (b"\n  Score = 6  \n\n", 0, 6, None),                          # the whole stderr is stripped ...
    (b"x\n  Score = 6\n", 0, None, "the tester printed no 'Score = N' line:   Score = 6"),   # ... not each line
    (b"Score = 12 (seed 3)\n", 0, 12, None),                       # a prefix match: the rest of the line is free
    (b"Score = 1\nScore = 7\n", 0, 7, None),                       # the last score line counts
    (b"Score = 900\n", 1, None, "the tester exited 1: Score = 900"),  # a score and a non-zero exit: WA
    (b"wrong answer: bad line\n", 1, None, "wrong answer: bad line"),
    (b"", 0, None, "the tester printed no 'Score = N' line: (no stderr)"),   # no score line: WA, not IE
    (b"Score: 5\n", 0, None, "the tester printed no 'Score = N' line: Score: 5"),
    (b"score = 5\n", 0, None, "the tester printed no 'Score = N' line: score = 5"),
])
def test_tester_protocol(stderr: bytes, exit_code: int, score: int | None, wa: str | None) -> None:
    verdict = read_tester(stderr, exit_code)
    assert (verdict.score, verdict.wrong_answer) == (score, wa)


@pytest.mark.parametrize(("stderr", "exit_code", "score", "wa", "re"), [
    (b"Score = 5\n", 0, 5, None, None),
    (b"wrong answer: bad\n", 1, None, None, "the tester exited 1: wrong answer: bad"),   # exit 1: RE
    (b"", 0, None, None, "the tester printed nothing on stderr: (no stderr)"),           # nothing: RE
    (b" \n", 0, None, None, "the tester printed nothing on stderr: (no stderr)"),
    (b"Score = 5\nbye\n", 0, None, "the tester printed a line after its 'Score = N' line: bye", None),
    (b"Score = -1\n", 0, None, "the tester printed no 'Score = N' line: Score = -1", None),
    (b"wrong answer: x\nScore = 5\n", 0, 5, None, None),     # reactive: ALE-Bench reads only the last line
])
def test_reactive_tester_protocol(stderr: bytes, exit_code: int, score: int | None, wa: str | None,
                                  re: str | None) -> None:
    verdict = read_reactive_tester(stderr, exit_code)
    assert (verdict.score, verdict.wrong_answer, verdict.runtime_error) == (score, wa, re)
