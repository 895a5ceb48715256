"""Medal thresholds from the leaderboard, by team count (MLE-bench's table, from Kaggle's
progression rules).

A threshold is the score of the team at a 1-based position of the leaderboard:

====================  ======================  ==================  ==================
teams N               gold                    silver              bronze
====================  ======================  ==================  ==================
1-99                  max(1, int(0.1 N))      max(1, int(0.2 N))  max(1, int(0.4 N))
100-249               10                      max(1, int(0.2 N))  max(1, int(0.4 N))
250-999               10 + int(0.002 N)       50                  100
1000 and more         10 + int(0.002 N)       max(1, int(0.05 N)) max(1, int(0.1 N))
====================  ======================  ==================  ==================

The median threshold is the median of all the leaderboard's scores.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from cmx_core.errors import ResultsError
from cmx_mlebench.leaderboard import Leaderboard


@dataclass(frozen=True)
class Positions:
    """1-based leaderboard positions of the gold, silver and bronze thresholds."""

    gold: int
    silver: int
    bronze: int


@dataclass(frozen=True)
class Thresholds:
    gold: float
    silver: float
    bronze: float
    median: float
    lower_is_better: bool
    teams: int


def medal_positions(teams: int) -> Positions:
    """The positions for a leaderboard of ``teams`` rows (a ResultsError for none)."""
    if teams < 1:
        raise ResultsError("a leaderboard with no team has no medal thresholds; restore its leaderboard.csv")
    if teams < 100:
        return Positions(max(1, int(0.1 * teams)), max(1, int(0.2 * teams)), max(1, int(0.4 * teams)))
    if teams < 250:
        return Positions(10, max(1, int(0.2 * teams)), max(1, int(0.4 * teams)))
    if teams < 1000:
        return Positions(10 + int(0.002 * teams), 50, 100)
    return Positions(10 + int(0.002 * teams), max(1, int(0.05 * teams)), max(1, int(0.1 * teams)))


def thresholds(board: Leaderboard) -> Thresholds:
    at = medal_positions(board.teams)
    scores = board.scores
    return Thresholds(gold=scores[at.gold - 1], silver=scores[at.silver - 1], bronze=scores[at.bronze - 1],
                      median=float(statistics.median(scores)), lower_is_better=board.lower_is_better,
                      teams=board.teams)
