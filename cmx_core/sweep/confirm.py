"""How sure a search is (#51): once its budget is spent, the best point and the runner-up
each run ``confirm`` times more, and the runner-up's distance from the best is told in units
of the noise those runs show.

The noise is the pooled standard deviation of the two points' values (the search's run and
the confirmation runs of each); the distance is the difference of their medians over it,
positive when the best is still ahead. Under 2 units the two are not told apart. Each
confirmation run is an ordinary recorded run of the sweep, in ``confirm/point-N-cK/``, with
its record ``confirm/point-N-cK.json``: a resumed search runs only the ones it lacks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.sweep.batch import PointOutcome
from cmx_core.sweep.dirs import fresh_dir
from cmx_core.sweep.state import read_record, write_record

CONFIRM_DIR = "confirm"
APART = 2.0
"""Noise units beyond which the best and the runner-up are told apart."""

RunInto = Callable[[int, Path], PointOutcome]
"""Runs the point at an index once into a run directory (not recorded as the point's)."""
ValueOf = Callable[[PointOutcome], float | None]
"""The trusted value of the objective in a run's outcome, or None."""


@dataclass(frozen=True)
class Noise:
    """The values of the best point and of the runner-up, and what they say."""

    best: tuple[float, ...]
    runner_up: tuple[float, ...]
    maximize: bool
    lost: int = 0
    """Confirmation runs that gave no trusted value (left out)."""

    @property
    def sigma(self) -> float | None:
        """The pooled sample standard deviation; None without two values on a side."""
        dof = sum(len(v) - 1 for v in (self.best, self.runner_up) if len(v) > 1)
        if dof < 1:
            return None
        squares = sum(statistics.variance(v) * (len(v) - 1) for v in (self.best, self.runner_up) if len(v) > 1)
        return math.sqrt(squares / dof)

    @property
    def distance(self) -> float | None:
        """(median of the best - median of the runner-up) / sigma, positive when the best
        is ahead; None when sigma is unknown or zero."""
        sigma = self.sigma
        if not sigma:
            return None
        gap = statistics.median(self.best) - statistics.median(self.runner_up)
        return (gap if self.maximize else -gap) / sigma

    def verdict(self) -> str:
        distance = self.distance
        if distance is None:
            return "noise unknown: the runs did not vary" if self.sigma == 0 else "noise unknown"
        if distance >= APART:
            return "the best is ahead beyond the noise"
        if distance <= -APART:
            return "the runner-up measured better beyond the noise when run again"
        return "within the noise: the two are not told apart"

    def to_json(self) -> dict[str, Any]:
        return {"samples": {"best": list(self.best), "runner_up": list(self.runner_up)}, "sigma": self.sigma,
                "distance": self.distance, "verdict": self.verdict(), "lost": self.lost,
                "how": f"pooled standard deviation of {len(self.best)} runs of the best and {len(self.runner_up)} "
                       "of the runner-up; distance = (median of the best - median of the runner-up) / sigma"}


def confirm_values(folder: Path, index: int, count: int, run_into: RunInto, value_of: ValueOf
                   ) -> tuple[list[float], int]:
    """The values of ``count`` confirmation runs of point ``index`` (recorded ones read, the
    rest run now), and how many gave none."""
    values, lost = [], 0
    for k in range(1, count + 1):
        outcome = _recorded_or_run(folder, index, k, run_into)
        value = value_of(outcome)
        if value is None:
            lost += 1
        else:
            values.append(value)
    return values, lost


def _recorded_or_run(folder: Path, index: int, k: int, run_into: RunInto) -> PointOutcome:
    record = folder / CONFIRM_DIR / f"point-{index}-c{k}.json"
    earlier = read_record(record)
    if earlier is not None:
        return earlier
    (folder / CONFIRM_DIR).mkdir(parents=True, exist_ok=True)
    outcome = run_into(index, fresh_dir(folder / CONFIRM_DIR, f"point-{index}-c{k}"))  # a killed attempt keeps its own
    write_record(record, outcome)
    return outcome
