"""The per-competition report (MLE-bench's fields) and the medals a score earns.

Medals are exclusive (gold, else silver, else bronze), each reached at its threshold
(``>=``, or ``<=`` when lower is better); above-median is strict. A submission without a
score (missing or invalid) gets no medal and is not above the median, but its report keeps
the thresholds and says why it has no score.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from cmx_mlebench.thresholds import Thresholds


@dataclass(frozen=True)
class Medals:
    gold: bool
    silver: bool
    bronze: bool
    above_median: bool

    @property
    def any(self) -> bool:
        return self.gold or self.silver or self.bronze


def _reaches(score: float, threshold: float, lower_is_better: bool) -> bool:
    return score <= threshold if lower_is_better else score >= threshold


def medals(score: float | None, limits: Thresholds) -> Medals:
    """The medals of ``score`` (none for ``None``)."""
    if score is None:
        return Medals(False, False, False, False)
    low = limits.lower_is_better
    gold = _reaches(score, limits.gold, low)
    silver = not gold and _reaches(score, limits.silver, low)
    bronze = not gold and not silver and _reaches(score, limits.bronze, low)
    above = score < limits.median if low else score > limits.median
    return Medals(gold, silver, bronze, above)


@dataclass(frozen=True)
class CompetitionReport:
    """MLE-bench's ``CompetitionReport`` fields, plus why a submission has no score
    (``reason``), the leaderboard's size and source, and the seed of an agent run.

    ``created_at`` is a ``datetime`` as in MLE-bench (``datetime.now()``, the local time
    without a zone) and :meth:`to_dict` writes it as MLE-bench does, ``created_at.isoformat()``."""

    competition_id: str
    score: float | None
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    submission_exists: bool
    valid_submission: bool
    is_lower_better: bool
    created_at: datetime
    submission_path: str
    reason: str | None
    leaderboard_teams: int
    leaderboard_source: str
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "created_at": self.created_at.isoformat()}


@dataclass(frozen=True)
class Submission:
    """What grading found: the submission's path, whether it exists, and its score or why it has none."""

    path: str
    exists: bool
    score: float | None
    reason: str | None


@dataclass(frozen=True)
class ReportOrigin:
    """When the report was made, where the leaderboard came from, and the agent run's seed."""

    created_at: datetime
    leaderboard_source: str
    seed: int | None = None


def build_report(competition_id: str, submission: Submission, limits: Thresholds,
                 origin: ReportOrigin) -> CompetitionReport:
    score = submission.score
    won = medals(score, limits)
    return CompetitionReport(
        competition_id=competition_id, score=score, gold_threshold=limits.gold, silver_threshold=limits.silver,
        bronze_threshold=limits.bronze, median_threshold=limits.median, any_medal=won.any, gold_medal=won.gold,
        silver_medal=won.silver, bronze_medal=won.bronze, above_median=won.above_median,
        submission_exists=submission.exists, valid_submission=score is not None,
        is_lower_better=limits.lower_is_better, created_at=origin.created_at, submission_path=submission.path,
        reason=submission.reason, leaderboard_teams=limits.teams, leaderboard_source=origin.leaderboard_source,
        seed=origin.seed)
