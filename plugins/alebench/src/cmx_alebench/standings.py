"""Rank and performance of an overall score against a contest's standings, by ALE-Bench's rules (§3.5).

Standings (``standings_scores*.csv``: rank, score) are in "best first" order for every
problem: ranks ascending, scores descending, every score above 0 but the last row's, which is
0. A ``score_type: minimize`` problem's table is in that order too, and a total is compared
with ``>`` as for maximize: there is no lower-is-better branch.

Consecutive rows with one score form a group ``(score, first, last)`` where ``last`` is the
next group's first rank - 1 (rows 5, 5 then 7 make the group 5..6); the final score-0 row is
its own group. A total of 0 gets the score-0 row's rank. Otherwise the first group whose score
is below the total gives its first rank (and that rank for the performance); a group whose
score equals the total gives its first rank and the mid-rank ``(first + last) / 2`` for the
performance.

``performance.csv`` (rank, performance): a row whose rank differs from the next row's is keyed
at ``(rank + next_rank - 1) / 2``; the last row at its own rank. An exact key gives its value;
otherwise the value is interpolated linearly between the neighbouring keys, or extrapolated
from the first two keys below the first key; a rank above the last key is an error. The
result is rounded with Python's ``round()`` (half to even: 1850.5 gives 1850).
"""

from __future__ import annotations

import bisect
import csv
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError


@dataclass(frozen=True)
class Group:
    """Standings rows with one score: ranks ``first`` to ``last`` (the next group's first - 1)."""

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


def group_rows(rows: Sequence[tuple[int, int]], where: str = "standings") -> tuple[Group, ...]:
    """Standings rows (rank, score), best first, as groups; a UsageError names a row out of order."""
    if not rows or rows[-1][1] != 0:
        raise UsageError(f"{where}: the last row must have score 0 (the rank of a submission that scores nothing)")
    for line, ((rank, score), (next_rank, next_score)) in enumerate(itertools.pairwise(rows), 2):
        if next_rank < rank or next_score > score:
            raise UsageError(f"{where}: row {line} (rank {rank}, score {score}) is followed by rank {next_rank}, "
                             f"score {next_score}; ranks must ascend and scores descend (best first)")
        if score <= 0:
            raise UsageError(f"{where}: row {line} has score {score}; only the last row may have score 0")
    starts: list[tuple[int, int]] = []
    for rank, score in rows[:-1]:
        if not starts or starts[-1][1] != score:
            starts.append((rank, score))
    final = rows[-1][0]
    groups = [Group(score, first, (starts[i + 1][0] if i + 1 < len(starts) else final) - 1)
              for i, (first, score) in enumerate(starts)]
    groups.append(Group(0, final, final))
    return tuple(groups)


def load_standings(path: Path) -> tuple[Group, ...]:
    """The standings grouped by score, best first; a UsageError names a malformed file."""
    return group_rows(_rows(path, ("rank", "score")), str(path))


def place(total: int, groups: Sequence[Group]) -> Placement:
    """The rank of ``total`` among ``groups`` (see the module docstring)."""
    if total == 0:
        last = groups[-1]
        return Placement(last.first, float(last.first))
    for group in groups:
        if group.score < total:
            return Placement(group.first, float(group.first))
        if group.score == total:
            return Placement(group.first, (group.first + group.last) / 2)
    raise UsageError(f"a total of {total} is below the score-0 row of the standings; totals are never negative")


@dataclass(frozen=True)
class PerformanceTable:
    """``performance.csv`` as (key rank, performance) points, keys ascending."""

    keys: tuple[float, ...]
    values: tuple[int, ...]
    where: str = "performance.csv"

    def performance(self, rank: float) -> int:
        """The value at an exact key, else interpolated (extrapolated below the first key), rounded half to even."""
        at = bisect.bisect_left(self.keys, rank)
        if at < len(self.keys) and self.keys[at] == rank:
            return self.values[at]
        if at == len(self.keys):
            raise UsageError(f"{self.where}: rank {rank:g} is beyond the table's last rank {self.keys[-1]:g}; "
                             "the table must cover the standings' score-0 rank")
        if len(self.keys) < 2:
            raise UsageError(f"{self.where}: rank {rank:g} needs at least two rows to interpolate from")
        low = max(at - 1, 0)
        k0, k1 = self.keys[low], self.keys[low + 1]
        v0, v1 = self.values[low], self.values[low + 1]
        return round(v0 + (v1 - v0) * (rank - k0) / (k1 - k0))


def load_performance(path: Path) -> PerformanceTable:
    """``performance.csv`` (rank, performance; ranks ascending) keyed as in the module docstring."""
    rows = _rows(path, ("rank", "performance"))
    distinct: list[tuple[int, int]] = []
    for rank, value in rows:
        if distinct and rank < distinct[-1][0]:
            raise UsageError(f"{path}: rank {rank} comes after rank {distinct[-1][0]}; sort the rows by rank")
        if distinct and distinct[-1][0] == rank:
            if distinct[-1][1] != value:
                raise UsageError(f"{path}: rank {rank} has performances {distinct[-1][1]} and {value}; "
                                 "rows with one rank must carry one performance")
            continue
        distinct.append((rank, value))
    keys = [(rank + distinct[i + 1][0] - 1) / 2 for i, (rank, _) in enumerate(distinct[:-1])]
    keys.append(float(distinct[-1][0]))
    return PerformanceTable(tuple(keys), tuple(value for _, value in distinct), str(path))
