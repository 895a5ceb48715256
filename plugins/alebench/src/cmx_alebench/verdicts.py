"""ALE-Bench's judge results and how one overall result is chosen from the cases' (§3.4)."""

from __future__ import annotations

import enum
from collections.abc import Iterable


class JudgeResult(str, enum.Enum):
    """The verdict of one case (or of a whole evaluation), named as ALE-Bench names them."""

    ACCEPTED = "ACCEPTED"
    COMPILATION_ERROR = "COMPILATION_ERROR"
    MEMORY_LIMIT_EXCEEDED = "MEMORY_LIMIT_EXCEEDED"
    TIME_LIMIT_EXCEEDED = "TIME_LIMIT_EXCEEDED"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    OUTPUT_LIMIT_EXCEEDED = "OUTPUT_LIMIT_EXCEEDED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    WRONG_ANSWER = "WRONG_ANSWER"


PRIORITY: tuple[JudgeResult, ...] = (
    JudgeResult.INTERNAL_ERROR,
    JudgeResult.WRONG_ANSWER,
    JudgeResult.RUNTIME_ERROR,
    JudgeResult.TIME_LIMIT_EXCEEDED,
    JudgeResult.MEMORY_LIMIT_EXCEEDED,
    JudgeResult.OUTPUT_LIMIT_EXCEEDED,
    JudgeResult.COMPILATION_ERROR,
)
"""Worst first: IE > WA > RE > TLE > MLE > OLE > CE; a result in none of these is AC."""


def overall(results: Iterable[JudgeResult]) -> JudgeResult:
    """The worst of ``results`` by :data:`PRIORITY`; ACCEPTED when every case (or none) is AC."""
    seen = set(results)
    for verdict in PRIORITY:
        if verdict in seen:
            return verdict
    return JudgeResult.ACCEPTED
