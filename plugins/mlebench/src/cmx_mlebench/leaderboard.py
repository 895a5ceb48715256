"""A competition's ``leaderboard.csv`` (Kaggle's private leaderboard, best team first).

Only the ``score`` column is read; the other columns of Kaggle's export (``teamId``,
``submissionDate``...) may be present or not. Whether lower is better is inferred from the
order, as MLE-bench does: the first row's score is below the last row's.
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import ResultsError

COLUMNS = ("scoreNullable", "teamId", "hasTeamName", "submissionDate", "score", "hasScore")
"""The columns of a Kaggle leaderboard export, in its order."""


@dataclass(frozen=True)
class Leaderboard:
    """The scores of the teams, best first, as the file lists them."""

    scores: tuple[float, ...]
    source: str = ""

    @property
    def teams(self) -> int:
        return len(self.scores)

    @property
    def lower_is_better(self) -> bool:
        """MLE-bench's inference: the first (best) score is below the last one."""
        return self.scores[0] < self.scores[-1]


def parse_leaderboard(text: str, source: str) -> Leaderboard:
    """The scores of a leaderboard CSV; an empty, malformed or unsorted one is a one-line ResultsError."""
    rows = list(csv.DictReader(text.splitlines()))
    if not rows or "score" not in rows[0]:
        raise ResultsError(f"{source}: a leaderboard needs a header with a 'score' column and at least one team; "
                           "restore the competition's leaderboard.csv")
    scores = tuple(_score(row.get("score"), source, line) for line, row in enumerate(rows, start=2))
    board = Leaderboard(scores, source)
    step = -1.0 if board.lower_is_better else 1.0
    for line, (a, b) in enumerate(itertools.pairwise(scores), start=3):
        if (a - b) * step < 0:
            raise ResultsError(f"{source}:{line}: the leaderboard is not sorted best first (score {b} after {a}); "
                               "restore the competition's leaderboard.csv")
    return board


def read_leaderboard(path: Path) -> Leaderboard:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read the leaderboard ({exc.strerror}); prepare the competition again") \
            from None
    return parse_leaderboard(text, str(path))


def _score(value: str | None, source: str, line: int) -> float:
    try:
        score = float(value) if value is not None else math.nan
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise ResultsError(f"{source}:{line}: score {value!r} is not a finite number; restore the leaderboard.csv")
    return score


def leaderboard_csv(scores: list[tuple[str, float]], lower_is_better: bool) -> str:
    """A leaderboard in Kaggle's column layout (plus ``teamName``) from (team, score), sorted best first."""
    ordered = sorted(scores, key=lambda item: item[1], reverse=not lower_is_better)
    lines = [",".join((*COLUMNS, "teamName"))]
    for team_id, (name, score) in enumerate(ordered, start=1):
        value = repr(float(score))
        lines.append(",".join((value, str(team_id), "True", "2000-01-01 00:00:00", value, "True", name)))
    return "\n".join(lines) + "\n"
