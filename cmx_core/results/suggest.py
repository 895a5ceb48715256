"""The next runs worth measuring (``cmx results suggest``, #51): among the configurations
on the grid of the levels already run (plus the midpoints between neighbouring levels of a
number axis), those not yet measured whose optimistic prediction (the interval's better
end: the upper bound where higher is better) is best, so that the runs go where the best
configuration may be and the model is least sure."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from cmx_core.results.learning_set import Value
from cmx_core.results.predict import Model, Prediction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_CANDIDATES = 20_000
"""The most grid points scored; a larger grid is sampled evenly (seeded)."""


@dataclass(frozen=True)
class Suggestion:
    """A configuration to run next and its prediction; ``optimistic`` is the interval's
    better end, by which it was ranked."""

    prediction: Prediction
    optimistic: float

    def to_json(self) -> dict[str, Any]:
        return {**self.prediction.to_json(), "optimistic": self.optimistic}


def suggest(model: Model, count: int) -> list[Suggestion]:
    """The ``count`` best unmeasured configurations by their optimistic prediction."""
    candidates = [c for c in _grid(model) if not model.data.measured(c)]
    if not candidates:
        return []
    better = model.data.higher_is_better
    predictions = model.predict(candidates)
    ranked = sorted(predictions, key=lambda p: -(p.high if better else -p.low))
    return [Suggestion(p, p.high if better else p.low) for p in ranked[:count]]


def _grid(model: Model) -> list[dict[str, Value]]:
    levels = [_levels(axis.levels, axis.numeric, axis.log) for axis in model.axes]
    names = [axis.name for axis in model.axes]
    size = math.prod(len(v) for v in levels)
    step = max(1, math.ceil(size / MAX_CANDIDATES))
    return [dict(zip(names, values, strict=True)) for values in itertools.islice(itertools.product(*levels), 0, None,
                                                                                  step)]


def _levels(levels: tuple[Value, ...], numeric: bool, log: bool) -> list[Value]:
    """The levels run, and for a number axis the midpoints between neighbours (geometric in
    log space, rounded when every level is a whole number)."""
    if not numeric:
        return list(levels)
    numbers = sorted(float(v) for v in levels)
    whole = all(v.is_integer() for v in numbers)
    mids = [math.sqrt(a * b) if log else (a + b) / 2 for a, b in itertools.pairwise(numbers)]
    mids = [float(round(m)) if whole else float(f"{m:.4g}") for m in mids]
    return sorted(set(numbers) | {m for m in mids if m not in numbers})
