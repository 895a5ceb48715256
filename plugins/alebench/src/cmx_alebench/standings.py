"""Rank and performance of an overall score against a contest's standings (§3.5).

The standings (``standings_scores*.csv``: rank, score; best first; the last row has score 0)
are grouped into runs of equal score. A total of 0 gets the score-0 row's rank. Otherwise
the first group the total beats gives its first rank; a total equal to a group's score gets
that group's first rank as its rank and the mean of the group's ranks for its performance.
Performance comes from ``performance.csv``: each distinct rank there is keyed at the middle
of the rank range it covers (to the next row's rank - 1; the last row keeps its own rank),
and a rank between two keys is linearly interpolated, then rounded.
"""

from __future__ import annotations

import bisect
import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.scoring import round_half_up
from cmx_core.errors import UsageError


@dataclass(frozen=True)
class Group:
    """Standings rows with one score: ranks ``first`` to ``last``."""

    score: int
    first: int
    last: int


@dataclass(frozen=True)
class Placement:
    """Where a total lands: the standings rank and the (possibly fractional) rank performance uses."""

    rank: int
    rank_for_performance: float


def _rows(path: Path, columns: tuple[str, str]) -> list[tuple[int, int]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise UsageError(f"{path}: missing column(s) {', '.join(missing)}; the header must name "
                                 f"{', '.join(columns)}")
            rows = [(int(float(row[columns[0]])), int(float(row[columns[1]]))) for row in reader]
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror}); give a readable CSV") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path}: a {columns[0]}/{columns[1]} value is not a number ({exc}); fix the row") from None
    if not rows:
        raise UsageError(f"{path}: no rows; the table needs at least one {columns[0]},{columns[1]} row")
    return rows


def load_standings(path: Path) -> tuple[Group, ...]:
    """The standings grouped by score, best first; a UsageError names a malformed file."""
    rows = _rows(path, ("rank", "score"))
    if rows[-1][1] != 0:
        raise UsageError(f"{path}: the last row must have score 0 (the rank of a submission that scores nothing)")
    groups: list[Group] = []
    for rank, score in rows:
        if groups and groups[-1].score == score:
            groups[-1] = Group(score, groups[-1].first, rank)
        else:
            groups.append(Group(score, rank, rank))
    return tuple(groups)


def place(total: int, groups: Sequence[Group], maximize: bool = True) -> Placement:
    """The rank of ``total`` (see the module docstring); lower is better for ``maximize=False``."""
    if total == 0:
        last = groups[-1]
        return Placement(last.first, float(last.first))
    for group in groups:
        if group.score == total:
            return Placement(group.first, (group.first + group.last) / 2)
        beaten = group.score == 0 or (group.score < total if maximize else group.score > total)
        if beaten:
            return Placement(group.first, float(group.first))
    last = groups[-1]
    return Placement(last.first, float(last.first))


@dataclass(frozen=True)
class PerformanceTable:
    """``performance.csv`` as (key rank, performance) points, keys ascending."""

    keys: tuple[float, ...]
    values: tuple[int, ...]

    def performance(self, rank: float) -> int:
        """The table value at an exact key, else the rounded linear interpolation (clamped at the ends)."""
        at = bisect.bisect_left(self.keys, rank)
        if at < len(self.keys) and self.keys[at] == rank:
            return self.values[at]
        if at == 0:
            return self.values[0]
        if at == len(self.keys):
            return self.values[-1]
        k0, k1 = self.keys[at - 1], self.keys[at]
        v0, v1 = self.values[at - 1], self.values[at]
        return round_half_up(v0 + (v1 - v0) * (rank - k0) / (k1 - k0))


def load_performance(path: Path) -> PerformanceTable:
    """``performance.csv`` (rank, performance; ranks ascending) keyed at the middle of each rank range."""
    rows = _rows(path, ("rank", "performance"))
    distinct: list[tuple[int, int]] = []
    for rank, value in rows:
        if distinct and rank < distinct[-1][0]:
            raise UsageError(f"{path}: rank {rank} comes after rank {distinct[-1][0]}; sort the rows by rank")
        if not distinct or distinct[-1][0] != rank:
            distinct.append((rank, value))
    keys = [(rank + distinct[i + 1][0] - 1) / 2 for i, (rank, _) in enumerate(distinct[:-1])]
    keys.append(float(distinct[-1][0]))
    return PerformanceTable(tuple(keys), tuple(value for _, value in distinct))
