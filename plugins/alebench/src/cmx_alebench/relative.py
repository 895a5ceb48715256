"""Relative problems (§3.4): every private case rescaled against all contestants' scores
for that case, totals re-summed and everyone re-ranked.

``relative_results[_lite].csv`` has one row per contestant and a column ``private_<i>``
per private case holding that contestant's absolute score; an empty or negative cell is a
rejected case and takes no part.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_alebench.scoring import RelativeType, relative_score
from cmx_alebench.standings import Group
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
    """Our relative score per case, our total and the re-ranked standings with us left out."""

    ours: tuple[int | None, ...]
    total: int
    standings: tuple[Group, ...]


def rescale(kind: RelativeType, max_score: int, ours: Sequence[int | None], field: Contestants) -> Rescaled:
    """Rescale every case for us and for each contestant (everyone's pool includes us)."""
    everyone = [tuple(ours), *field.rows]
    rescaled = []
    for index, person in enumerate(everyone):
        scores: list[int | None] = []
        for case, own in enumerate(person):
            if own is None:
                scores.append(None)
                continue
            others = [p[case] for i, p in enumerate(everyone) if i != index]
            scores.append(relative_score(kind, own, [o for o in others if o is not None], max_score))
        rescaled.append(tuple(scores))
    totals = sorted((sum(s for s in row if s is not None) for row in rescaled[1:]), reverse=True)
    return Rescaled(rescaled[0], sum(s for s in rescaled[0] if s is not None), _groups(totals))


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
