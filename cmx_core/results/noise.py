"""The noise rule of a replay: is the replayed distribution of a metric the original's?

The rule is a percentile bootstrap: :data:`RESAMPLES` resamples of each side (with
replacement, a fixed seed so the same samples always give the same answer) give a 95 %
interval of the *relative difference of the medians*, ``(replay - original) / |original|``.
It needs :data:`MIN_SAMPLES` values on each side; with fewer it cannot tell noise from a
change and answers ``inconclusive`` (never ``differs``), unless every value on both sides is
the same number (a deterministic metric such as an item count).

Against the tolerance band ``±tolerance`` (relative):

* the whole interval inside the band: ``reproduced``;
* the whole interval outside the band (all of it above, or all of it below): ``differs``;
* otherwise: ``within noise`` (the difference is not resolved beyond the noise).

A zero original median has no relative difference: the interval is then in the metric's
unit, and only ``0..0`` is inside the band.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cmx_core.results.numbers import fmt_number

NoiseVerdict = Literal["reproduced", "within noise", "differs", "inconclusive"]

MIN_SAMPLES = 3
"""Fewer values than this on a side: the rule cannot judge the noise (``inconclusive``)."""
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0
RULE = (f"bootstrap {CONFIDENCE:.0%} interval of the relative difference of medians "
        f"({RESAMPLES} resamples, seed {SEED}, at least {MIN_SAMPLES} samples a side)")
"""The rule's name, as the replay's result states it."""


@dataclass(frozen=True)
class NoiseJudgement:
    verdict: NoiseVerdict
    effect: float | None
    """The relative difference of the medians (0.5 = the replay's median is 50 % higher);
    None when the original median is 0 (see ``absolute``)."""
    interval: tuple[float, float] | None
    """The bootstrap interval of ``effect`` (or of the absolute difference); None when the
    rule could not be applied."""
    absolute: bool
    reason: str


def judge_noise(original: Sequence[float], replay: Sequence[float], tolerance: float) -> NoiseJudgement:
    """Judge two samples of one metric by :data:`RULE` against ``±tolerance``."""
    base = float(statistics.median(original))
    absolute = base == 0
    effect = None if absolute else (float(statistics.median(replay)) - base) / abs(base)
    counts = f"{len(original)} vs {len(replay)} samples"
    if len(set(original) | set(replay)) == 1:
        every = f"every value is {fmt_number(original[0])} ({counts})"
        return NoiseJudgement("reproduced", 0.0, (0.0, 0.0), absolute, every)
    if min(len(original), len(replay)) < MIN_SAMPLES:
        shown = "" if effect is None else f"{effect:+.1%} "
        return NoiseJudgement("inconclusive", effect, None, absolute,
                              f"{shown}on {counts}: the rule needs at least {MIN_SAMPLES} a side to tell noise "
                              "from a change")
    low, high = _interval(original, replay, base, absolute)
    shown = f"{low:+.6g}..{high:+.6g} (absolute)" if absolute else f"{low:+.1%}..{high:+.1%}"
    band = 0.0 if absolute else tolerance
    if -band <= low and high <= band:
        verdict: NoiseVerdict = "reproduced"
        where = "inside"
    elif low > band or high < -band:
        verdict, where = "differs", "wholly outside"
    else:
        verdict, where = "within noise", "overlapping"
    effect_text = "" if effect is None else f"{effect:+.1%}, "
    return NoiseJudgement(verdict, effect, (low, high), absolute,
                          f"{effect_text}interval {shown} {where} the band ±{band:.0%} ({counts})")


def _interval(original: Sequence[float], replay: Sequence[float], base: float, absolute: bool) -> tuple[float, float]:
    rng = random.Random(SEED)
    scale = 1.0 if absolute else abs(base)
    differences = sorted(
        (_resampled_median(rng, replay) - _resampled_median(rng, original)) / scale for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return differences[int(tail * RESAMPLES)], differences[min(RESAMPLES - 1, int((1 - tail) * RESAMPLES))]


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """The percentile-bootstrap :data:`CONFIDENCE` interval of the median of ``values`` (the
    rule's resamples and seed: the same values always give the same interval)."""
    rng = random.Random(SEED)
    medians = sorted(_resampled_median(rng, values) for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return medians[int(tail * RESAMPLES)], medians[min(RESAMPLES - 1, int((1 - tail) * RESAMPLES))]


def _resampled_median(rng: random.Random, values: Sequence[float]) -> float:
    return float(statistics.median(rng.choices(values, k=len(values))))
