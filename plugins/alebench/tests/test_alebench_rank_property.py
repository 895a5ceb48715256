"""Rank and performance against an independent re-derivation of §3.5, on 10,000 random standings.

The re-derivation below works on the raw rows (no groups), in integers (ranks doubled, so
a mid-rank is exact) and rounds half to even by hand; the code under test works on groups,
floats and Python's ``round()``. Each standings is AtCoder-form (tied rows share a rank and
the next row's rank skips), with random rank gaps, ties at the top and sometimes ties whose
rows carry distinct ranks; the totals cover every boundary: each score, one above and below
it, 0, 1 and above the best.
"""

from __future__ import annotations

import itertools
import random

import pytest

from cmx_alebench.standings import PerformanceTable, group_rows, place
from cmx_core.errors import UsageError

N_STANDINGS = 10_000


def _standings(rng: random.Random) -> list[tuple[int, int]]:
    n = rng.randint(1, 25)
    scores = sorted((rng.randint(1, 60) * rng.choice((1, 1, 10)) for _ in range(n)), reverse=True)
    if n > 1 and rng.random() < 0.3:
        scores[1] = scores[0]                          # a tie at the top
    shared = rng.random() < 0.8                        # AtCoder form, else ties on distinct ranks
    rows: list[tuple[int, int]] = []
    for index, score in enumerate(scores):
        if rows and rows[-1][1] == score and shared:
            rows.append((rows[-1][0], score))
        else:
            rank = index + 1 if not rows else max(index + 1, rows[-1][0] + 1)
            rows.append((rank + (rng.randint(1, 3) if rng.random() < 0.15 else 0), score))
    last = (rows[-1][0] if rows else 0) + rng.choice((1, 1, 2))
    return [*rows, (last, 0)]


def _performance_rows(rng: random.Random, final_rank: int) -> list[tuple[int, int]]:
    if final_rank > 2 and rng.random() < 0.05:
        final_rank -= 1                                # a table short of the score-0 rank: an error there
    ranks = sorted({1, *(rng.randint(1, final_rank) for _ in range(rng.randint(1, 8)))})
    if ranks[-1] < final_rank or rng.random() < 0.3:
        ranks.append(final_rank + (rng.randint(0, 2) if ranks[-1] < final_rank else rng.randint(1, 2)))
    values = sorted((rng.randint(0, 4000) for _ in ranks), reverse=True)
    rows = []
    for rank, value in zip(ranks, values, strict=True):
        rows.append((rank, value))
        if rng.random() < 0.1:
            rows.append((rank, value))                 # a repeated rank with its one performance
    return rows


def _table(rows: list[tuple[int, int]]) -> PerformanceTable:
    """The code under test's table, built the way load_performance builds it from a file."""
    distinct = list(dict.fromkeys(rows))
    keys = [(r + distinct[i + 1][0] - 1) / 2 for i, (r, _) in enumerate(distinct[:-1])] + [float(distinct[-1][0])]
    return PerformanceTable(tuple(keys), tuple(v for _, v in distinct))


def expected_rank(rows: list[tuple[int, int]], total: int) -> tuple[int, int]:
    """(rank, 2 * rank-for-performance) straight from §3.5's words, on the rows."""
    if total == 0:
        return rows[-1][0], 2 * rows[-1][0]
    for i, (rank, score) in enumerate(rows):
        if score < total:
            return rank, 2 * rank
        if score == total:
            below = next(r for r, s in rows[i:] if s < total)      # the next group's start
            return rank, rank + below - 1                           # first + last, last = below - 1
    raise AssertionError("unreachable: the last row has score 0")


def _round_half_even(numerator: int, denominator: int) -> int:
    if denominator < 0:
        numerator, denominator = -numerator, -denominator
    floor, rest = divmod(numerator, denominator)
    if 2 * rest > denominator or (2 * rest == denominator and floor % 2 == 1):
        return floor + 1
    return floor


def expected_performance(rows: list[tuple[int, int]], doubled_rank: int) -> int | None:
    """The performance at rank doubled_rank / 2, or None where ALE-Bench raises (above the last key)."""
    keyed: dict[int, int] = {}
    for (rank, value), (next_rank, _) in itertools.pairwise(rows):
        if rank != next_rank:
            keyed[rank + next_rank - 1] = value            # doubled key of (rank + next - 1) / 2
    keyed[2 * rows[-1][0]] = rows[-1][1]
    if doubled_rank in keyed:
        return keyed[doubled_rank]
    keys = sorted(keyed)
    if doubled_rank > keys[-1]:
        return None
    if doubled_rank < keys[0]:
        low, high = keys[0], keys[1]
    else:
        low = max(k for k in keys if k < doubled_rank)
        high = min(k for k in keys if k > doubled_rank)
    v0, v1 = keyed[low], keyed[high]
    # v0 + (v1 - v0) * (q - low) / (high - low), in integers
    return _round_half_even(v0 * (high - low) + (v1 - v0) * (doubled_rank - low), high - low)


def _totals(rows: list[tuple[int, int]], rng: random.Random) -> set[int]:
    totals = {0, 1, rows[0][1] + 1, rows[0][1] + rng.randint(2, 1000), rng.randint(1, rows[0][1] + 5)}
    for _, score in rows:
        totals.update((score, score + 1, max(score - 1, 0)))
    return totals


def test_10000_random_standings_match_the_rederivation() -> None:
    rng = random.Random(32)
    compared = differences = errors = 0
    for _ in range(N_STANDINGS):
        rows = _standings(rng)
        groups = group_rows(rows)
        perf_rows = _performance_rows(rng, rows[-1][0])
        table = _table(perf_rows)
        for total in sorted(_totals(rows, rng)):
            spot = place(total, groups)
            rank, doubled = expected_rank(rows, total)
            want = expected_performance(perf_rows, doubled)
            if want is None:
                with pytest.raises(UsageError, match="beyond the table's last rank"):
                    table.performance(spot.rank_for_performance)
                errors += 1
                got: int | None = None
            else:
                got = table.performance(spot.rank_for_performance)
            compared += 1
            if (spot.rank, spot.rank_for_performance * 2, got) != (rank, doubled, want):
                differences += 1
    assert differences == 0
    assert compared > 10 * N_STANDINGS and 0 < errors < compared // 10   # the error branch was exercised too


def test_the_generator_covers_the_cases_it_claims() -> None:
    """Ties at the top, shared ranks, gaps and distinct-rank ties all occur in the random standings."""
    rng = random.Random(32)
    seen = {"top tie": 0, "shared rank": 0, "gap": 0, "distinct-rank tie": 0}
    for _ in range(2000):
        rows = _standings(rng)
        body = rows[:-1]
        seen["top tie"] += len(body) > 1 and body[0][1] == body[1][1]
        pairs = list(itertools.pairwise(body))
        seen["shared rank"] += any(a[0] == b[0] for a, b in pairs)
        seen["distinct-rank tie"] += any(a[1] == b[1] and a[0] != b[0] for a, b in pairs)
        seen["gap"] += any(b[0] - a[0] > 1 and a[1] != b[1] for a, b in pairs)
    assert all(count > 50 for count in seen.values()), seen
