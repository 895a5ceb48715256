"""The verdict on a replay: the original run's metrics (its repeats in the bundle form a
distribution) against the replay's repeats, judged by one stated rule
(:data:`cmx_core.results.noise.RULE`, a bootstrap interval of the relative difference of
the medians) against the tolerance band ``±tolerance``.

* ``reproduced``: the interval lies inside the band (or every value is the same number);
* ``within noise``: the interval overlaps the band's edge: the difference is not resolved
  beyond the noise;
* ``inconclusive``: fewer samples than the rule needs on a side, or the interval lies wholly
  outside the band but the two sides' conditions differ beyond their bounds (``other load 1.4
  cores at record, 0.1 at replay``) or both were measured beyond a noise bound
  (:mod:`cmx_core.results.like_with_like`): never ``differs``;
* ``differs``: the interval lies wholly outside the band under matching quiet conditions (or
  conditions not recorded on a side, as before they were), or the run's status changed;
* ``not comparable``: another hardware class, a metric missing, or units or direction differ.

A run's verdict: another hardware class makes it ``not comparable``; else any metric that
``differs`` makes it ``differs``; else the worst of ``not comparable``, ``inconclusive``,
``within noise`` and ``reproduced``, in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from cmx_core.results.compare import Samples, samples_of
from cmx_core.results.hardware import of_document
from cmx_core.results.like_with_like import Likeness, compare_sides, speed_bound
from cmx_core.results.noise import RULE, judge_noise

ReplayVerdict = Literal["reproduced", "within noise", "inconclusive", "differs", "not comparable"]
_ORDER: tuple[ReplayVerdict, ...] = ("reproduced", "within noise", "inconclusive", "not comparable", "differs")
"""Metric verdicts from best to worst: the run takes its worst metric's."""

DEFAULT_TOLERANCE = 0.05
"""Relative half-width of the band a replayed metric must fall in to count as reproduced."""


@dataclass(frozen=True)
class MetricJudgement:
    name: str
    unit: str | None
    original: Samples | None
    replay: Samples | None
    band: tuple[float, float] | None
    verdict: ReplayVerdict
    reason: str
    effect: float | None = None
    """Relative difference of the medians, replay vs original (0.5 = 50 % higher)."""
    interval: tuple[float, float] | None = None
    """The rule's interval of ``effect`` (absolute units when the original median is 0)."""

    def to_json(self) -> dict[str, Any]:
        def side(s: Samples | None) -> dict[str, Any] | None:
            return None if s is None else {"median": s.median, "low": s.low, "high": s.high, "samples": s.n}

        return {"name": self.name, "unit": self.unit, "original": side(self.original), "replay": side(self.replay),
                "band": list(self.band) if self.band else None, "verdict": self.verdict, "reason": self.reason,
                "effect": self.effect, "interval": list(self.interval) if self.interval else None}


@dataclass(frozen=True)
class Judgement:
    verdict: ReplayVerdict
    reason: str
    original_runs: tuple[str, ...]
    replay_runs: tuple[str, ...]
    metrics: tuple[MetricJudgement, ...]
    tolerance: float = DEFAULT_TOLERANCE
    conditions: Likeness | None = None
    """The two sides' conditions compared (None: not judged, e.g. another hardware class)."""

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "rule": RULE, "tolerance": self.tolerance,
                "original_runs": list(self.original_runs), "replay_runs": list(self.replay_runs),
                "conditions": self.conditions.to_json() if self.conditions else None,
                "metrics": [m.to_json() for m in self.metrics]}


def worst(verdicts: Sequence[ReplayVerdict]) -> ReplayVerdict:
    """The worst of ``verdicts`` by :data:`_ORDER`; ``not comparable`` for none."""
    return max(verdicts, key=_ORDER.index) if verdicts else "not comparable"


def judge(original: Sequence[Mapping[str, Any]], replay: Sequence[Mapping[str, Any]],
          tolerance: float = DEFAULT_TOLERANCE) -> Judgement:
    """Judge the replays of one lock against the original repeats of it."""
    names = list(dict.fromkeys([n for d in original for n in d["metrics"]] + [n for d in replay for n in d["metrics"]]))
    likeness = compare_sides(original, replay)
    metrics = tuple(_like_with_like(_metric(n, [d["metrics"].get(n) for d in original],
                                            [d["metrics"].get(n) for d in replay], tolerance), likeness)
                    for n in names)
    verdict, reason = _overall(original, replay, metrics)
    if likeness.state == "not recorded":
        reason = f"{reason} ({likeness.reason})"
    return Judgement(verdict, reason, tuple(d["run_id"] for d in original), tuple(d["run_id"] for d in replay),
                     metrics, tolerance, likeness)


def _like_with_like(metric: MetricJudgement, likeness: Likeness) -> MetricJudgement:
    """A metric that ``differs`` is ``inconclusive`` where the conditions do not let the
    difference be called real (a metric the machine's speed moves); the reason names the
    condition, then the numbers."""
    if metric.verdict != "differs" or not likeness.blocks or not speed_bound(metric.unit):
        return metric
    return replace(metric, verdict="inconclusive", reason=f"{likeness.reason}; the numbers: {metric.reason}")


def _overall(original: Sequence[Mapping[str, Any]], replay: Sequence[Mapping[str, Any]],
             metrics: Sequence[MetricJudgement]) -> tuple[ReplayVerdict, str]:
    before, after = of_document(original[0]), of_document(replay[0])
    if before.id != after.id:
        return "not comparable", (f"hardware class {before.id} -> {after.id} ({'; '.join(before.differences(after))}): "
                                  "an A/B across hardware, not a reproduction")
    statuses = ({d["status"] for d in original}, {d["status"] for d in replay})
    if statuses[0] != statuses[1]:
        return "differs", f"status {'/'.join(sorted(statuses[0]))} -> {'/'.join(sorted(statuses[1]))}"
    if not metrics:
        return "not comparable", "neither side reports a metric"
    worst = max(metrics, key=lambda m: _ORDER.index(m.verdict))
    if worst.verdict == "reproduced":
        return "reproduced", f"all {len(metrics)} metric(s) reproduced"
    count = sum(m.verdict == worst.verdict for m in metrics)
    return worst.verdict, f"{count} of {len(metrics)} metric(s) {worst.verdict}, e.g. {worst.name}: {worst.reason}"


def _metric(name: str, before: Sequence[Mapping[str, Any] | None], after: Sequence[Mapping[str, Any] | None],
            tolerance: float) -> MetricJudgement:
    first = next((m for m in before if m), None)
    other = next((m for m in after if m), None)
    original, replay = samples_of(before), samples_of(after)
    unit = (first or other or {}).get("unit")
    if first is None or other is None or original is None or replay is None:
        side = "the original" if first is None or original is None else "the replay"
        return MetricJudgement(name, unit, original, replay, None, "not comparable", f"no value in {side}")
    if first["unit"] != other["unit"] or first["higher_is_better"] != other["higher_is_better"]:
        return MetricJudgement(name, unit, original, replay, None, "not comparable",
                               f"unit or direction differs: {first['unit']} -> {other['unit']}")
    half = abs(original.median) * tolerance
    band = (original.median - half, original.median + half)
    noise = judge_noise(original.values, replay.values, tolerance)
    return MetricJudgement(name, unit, original, replay, band, noise.verdict, noise.reason, noise.effect,
                           noise.interval)
