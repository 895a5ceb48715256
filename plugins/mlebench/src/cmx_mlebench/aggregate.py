"""Seed aggregates as MLE-bench reports them: per seed, the percentage of the split's
competitions that earned any medal (a competition without a report for that seed counts as
a failure); then the mean and the standard error of the mean over the seeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SeedTally:
    """One seed over the split: how many competitions, and which had what."""

    seed: int
    competitions: int
    any_medal: int
    gold: int
    above_median: int
    valid: int
    missing: tuple[str, ...]

    def pct(self, count: int) -> float:
        return 100.0 * count / self.competitions


@dataclass(frozen=True)
class MeanSem:
    mean: float | None
    sem: float | None
    n: int
    sem_reason: str | None = None


def mean_sem(values: Sequence[float]) -> MeanSem:
    """Mean and standard error (sample standard deviation / sqrt(n)); the SEM of one value is null."""
    if not values:
        return MeanSem(None, None, 0, "no seed")
    mean = statistics.fmean(values)
    if len(values) == 1:
        return MeanSem(mean, None, 1, "one seed: the standard error is undefined")
    return MeanSem(mean, statistics.stdev(values) / math.sqrt(len(values)), len(values))


def tally(seed: int, competitions: Sequence[str], reports: Mapping[str, Mapping[str, object]]) -> SeedTally:
    """``reports``: competition id -> its report (as a dict) for this seed; absent ones are failures."""
    present = [reports[c] for c in competitions if c in reports]
    return SeedTally(seed=seed, competitions=len(competitions),
                     any_medal=sum(bool(r.get("any_medal")) for r in present),
                     gold=sum(bool(r.get("gold_medal")) for r in present),
                     above_median=sum(bool(r.get("above_median")) for r in present),
                     valid=sum(bool(r.get("valid_submission")) for r in present),
                     missing=tuple(c for c in competitions if c not in reports))
