"""Overall scores (§3.4): the sum over accepted cases, and relative scoring of private cases."""

from __future__ import annotations

import bisect
import enum
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


def ratio_half_up(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded half up in exact integers, as ALE-Bench rounds ``max``
    and ``min`` (floating point would round M·s/best up where the exact value is just below a half:
    with M = 10^9 that moves a case by one point)."""
    quotient, remainder = divmod(numerator, denominator)
    return quotient + (1 if remainder * 2 >= denominator else 0)


def relative_score(kind: RelativeType, score: int, others: Sequence[int], max_score: int, rejected: int = 0) -> int:
    """One case's relative score given the other submissions' accepted scores on that case.

    ``others`` are the accepted scores of every other submission; ``rejected`` counts the other
    submissions rejected on the case (they take part in n, as ALE-Bench counts them).
    See :func:`case_relative`.
    """
    accepted = sorted([*others, score])
    return case_relative(kind, score, accepted, len(others) + 1 + rejected, max_score)


def case_relative(kind: RelativeType, score: int, accepted: Sequence[int], n: int, max_score: int) -> int:
    """One accepted score's relative score, ALE-Bench's arithmetic (``recalculate_relative_score``).

    ``accepted``: every accepted score on the case, ``score`` included, ascending; ``n``: every
    submission, rejected ones included. ``max``: M·s/best and ``min``: M·best/s, rounded half up
    in exact integers (:func:`ratio_half_up`); ``rank_*``: Python's
    ``round(M * (1.0 - (better + tied / 2) / n))`` in floating point (half to even), ``tied``
    not counting the score itself. Where ALE-Bench stops with an error (every accepted score 0
    on a ``max`` case; an accepted 0 on a ``min`` case) the case scores 0.
    """
    if kind is RelativeType.MAX:
        best = accepted[-1]
        return 0 if best <= 0 else ratio_half_up(max_score * score, best)
    if kind is RelativeType.MIN:
        return 0 if score <= 0 else ratio_half_up(max_score * accepted[0], score)
    low, high = bisect.bisect_left(accepted, score), bisect.bisect_right(accepted, score)
    better = len(accepted) - high if kind is RelativeType.RANK_MAX else low
    tied = high - low - 1
    return round(max_score * (1.0 - (better + tied / 2) / n))


def parse_relative_type(value: object, where: str) -> RelativeType | None:
    """The ``relative_score_type`` of a data.json, or a UsageError naming the file and the choices."""
    if value is None:
        return None
    try:
        return RelativeType(str(value))
    except ValueError:
        raise UsageError(f"{where}: relative_score_type {value!r} is not one of max, min, rank_max, rank_min") from None
