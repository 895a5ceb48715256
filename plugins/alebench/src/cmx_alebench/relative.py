"""Relative problems (§3.4): every private case rescaled against all contestants' scores
for that case, totals re-summed and everyone re-ranked.

``relative_results[_lite].csv`` has one row per contestant and a column ``private_<i>``
per private case holding that contestant's absolute score; an empty or negative cell is a
rejected case: it scores 0 and takes no part in ``best``, ``better`` or ``tied``, but it counts
in n, the number of submissions (as ALE-Bench counts it).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.scoring import RelativeType, case_relative
from cmx_alebench.standings import Group, Placement
from cmx_core.errors import UsageError


@dataclass(frozen=True)
class Contestants:
    """Per case, the accepted absolute scores of every contestant (None: rejected)."""

    rows: tuple[tuple[int | None, ...], ...]

    @property
    def n_cases(self) -> int:
        return len(self.rows[0]) if self.rows else 0


def load_contestants(path: Path, n_cases: int) -> Contestants:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            columns = [f"private_{i}" for i in range(n_cases)]
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise UsageError(f"{path}: missing column(s) {', '.join(missing[:3])}; "
                                 "one private_<i> column per private case")
            rows = tuple(tuple(_cell(row[c], path) for c in columns) for row in reader)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    return Contestants(rows)


def _cell(text: str | None, path: Path) -> int | None:
    if text is None or not text.strip():
        return None
    try:
        value = int(float(text))
    except ValueError:
        raise UsageError(f"{path}: {text!r} is not a score; write an integer or leave the cell empty") from None
    return None if value < 0 else value


@dataclass(frozen=True)
class Rescaled:
    """Our relative score per case (None: rejected), our total, and every contestant's total
    (best first) rescaled with us in the pool."""

    ours: tuple[int | None, ...]
    total: int
    others: tuple[int, ...]

    @property
    def standings(self) -> tuple[Group, ...]:
        """The contestants' totals as standings groups, with a score-0 row below them."""
        return _groups(self.others)

    def placement(self, zero_rank: int) -> Placement:
        """Our rank among the contestants, as ALE-Bench's ``get_new_rank`` ranks a relative total.

        A total of 0 takes ``zero_rank``, the standings file's score-0 row. Otherwise the rank is
        1 + the totals above ours, and the rank for the performance adds half of every total equal
        to ours (ours included) less one: ``rank + max(0.5 * (tied + 1) - 1, 0)``.
        """
        if self.total == 0:
            return Placement(zero_rank, float(zero_rank))
        rank = 1 + sum(1 for other in self.others if other > self.total)
        tied = sum(1 for other in self.others if other == self.total)
        return Placement(rank, float(rank) + max(0.5 * (tied + 1) - 1.0, 0.0))


def rescale(kind: RelativeType, max_score: int, ours: Sequence[int | None], field: Contestants) -> Rescaled:
    """Rescale every case for us and for each contestant: everyone's pool includes us, and n
    counts every submission, rejected ones too (ALE-Bench's ``recalculate_relative_score``)."""
    everyone = [tuple(ours), *field.rows]
    totals = [0] * len(everyone)
    scaled_ours: list[int | None] = []
    for case in range(len(ours)):
        column = [person[case] for person in everyone]
        accepted = sorted(score for score in column if score is not None)
        for index, own in enumerate(column):
            value = None if own is None else case_relative(kind, own, accepted, len(column), max_score)
            totals[index] += value or 0
            if index == 0:
                scaled_ours.append(value)
    return Rescaled(tuple(scaled_ours), totals[0], tuple(sorted(totals[1:], reverse=True)))


def _groups(totals: Sequence[int]) -> tuple[Group, ...]:
    groups: list[Group] = []
    for rank, score in enumerate(totals, 1):
        if groups and groups[-1].score == score:
            groups[-1] = Group(score, groups[-1].first, rank)
        else:
            groups.append(Group(score, rank, rank))
    if not groups or groups[-1].score != 0:
        groups.append(Group(0, len(totals) + 1, len(totals) + 1))
    return tuple(groups)
