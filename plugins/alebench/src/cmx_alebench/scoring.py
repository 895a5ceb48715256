"""Overall scores (§3.4): the sum over accepted cases, and relative scoring of private cases."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

from cmx_alebench.verdicts import JudgeResult
from cmx_core.errors import UsageError


class RelativeType(str, enum.Enum):
    """How a relative problem rescales a case's score against every contestant's."""

    MAX = "max"
    MIN = "min"
    RANK_MAX = "rank_max"
    RANK_MIN = "rank_min"


def overall_absolute(verdict: JudgeResult, cases: Sequence[tuple[JudgeResult, int]], allow_non_ac: bool) -> int:
    """0 on CE or IE; 0 when the overall verdict is not AC unless ``allow_non_ac``;
    otherwise the sum of the accepted cases' absolute scores."""
    if verdict in (JudgeResult.COMPILATION_ERROR, JudgeResult.INTERNAL_ERROR):
        return 0
    if verdict is not JudgeResult.ACCEPTED and not allow_non_ac:
        return 0
    return sum(score for result, score in cases if result is JudgeResult.ACCEPTED)


def round_half_up(value: float) -> int:
    """Round to the nearest integer, halves away from zero (the scores are never negative)."""
    return math.floor(value + 0.5)


def relative_score(kind: RelativeType, score: int, others: Sequence[int], max_score: int) -> int:
    """One case's relative score given the other submissions' scores on that case.

    ``others`` are the accepted scores of every other submission (rejected ones left out by
    the caller). ``max``: M·s/best; ``min``: M·best/s; ``rank_*``:
    round(M·(1 - (better + tied/2)/n)) with n counting this submission too.
    """
    pool = [*others, score]
    if kind is RelativeType.MAX:
        best = max(pool)
        return 0 if best <= 0 else round_half_up(max_score * score / best)
    if kind is RelativeType.MIN:
        best = min(pool)
        return 0 if score <= 0 else round_half_up(max_score * best / score)
    better = sum(1 for other in others if (other > score if kind is RelativeType.RANK_MAX else other < score))
    tied = sum(1 for other in others if other == score)
    return round_half_up(max_score * (1 - (better + tied / 2) / len(pool)))


def parse_relative_type(value: object, where: str) -> RelativeType | None:
    """The ``relative_score_type`` of a data.json, or a UsageError naming the file and the choices."""
    if value is None:
        return None
    try:
        return RelativeType(str(value))
    except ValueError:
        raise UsageError(f"{where}: relative_score_type {value!r} is not one of max, min, rank_max, rank_min") from None
