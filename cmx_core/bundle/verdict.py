"""The verdict on a replay: the original run's metrics (its repeats in the bundle form a
distribution) against the replay's, each with the tolerance band that applies.

* ``reproduced``: every metric's replay median lies in the band: the original's median ±
  ``tolerance`` (relative; exact for a zero).
* ``within noise``: outside the band, but inside the noise: the ranges of the repeats overlap
  (needs two or more samples on a side; with one on each the noise is unknown).
* ``differs``: beyond the band and the noise, or the run's status changed.
* ``not comparable``: another hardware class, a metric missing, or units or direction differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cmx_core.results.compare import NOISE_UNKNOWN, Samples, noise_verdict, samples_of
from cmx_core.results.hardware import of_document

ReplayVerdict = Literal["reproduced", "within noise", "differs", "not comparable"]
_ORDER: tuple[ReplayVerdict, ...] = ("reproduced", "within noise", "differs", "not comparable")

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

    def to_json(self) -> dict[str, Any]:
        def side(s: Samples | None) -> dict[str, Any] | None:
            return None if s is None else {"median": s.median, "low": s.low, "high": s.high, "samples": s.n}

        return {"name": self.name, "unit": self.unit, "original": side(self.original), "replay": side(self.replay),
                "band": list(self.band) if self.band else None, "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True)
class Judgement:
    verdict: ReplayVerdict
    reason: str
    original_runs: tuple[str, ...]
    replay_runs: tuple[str, ...]
    metrics: tuple[MetricJudgement, ...]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "original_runs": list(self.original_runs),
                "replay_runs": list(self.replay_runs), "metrics": [m.to_json() for m in self.metrics]}


def judge(original: Sequence[Mapping[str, Any]], replay: Sequence[Mapping[str, Any]],
          tolerance: float = DEFAULT_TOLERANCE) -> Judgement:
    """Judge the replays of one lock against the original repeats of it."""
    names = list(dict.fromkeys([n for d in original for n in d["metrics"]] + [n for d in replay for n in d["metrics"]]))
    metrics = tuple(_metric(n, [d["metrics"].get(n) for d in original], [d["metrics"].get(n) for d in replay],
                            tolerance) for n in names)
    verdict, reason = _overall(original, replay, metrics)
    return Judgement(verdict, reason, tuple(d["run_id"] for d in original), tuple(d["run_id"] for d in replay),
                     metrics)


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
        return "reproduced", f"all {len(metrics)} metric(s) inside their tolerance band"
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
    if band[0] <= replay.median <= band[1]:
        return MetricJudgement(name, unit, original, replay, band, "reproduced",
                               f"{replay.median:.6g} in {band[0]:.6g}..{band[1]:.6g} (±{tolerance:.0%})")
    noise, how = noise_verdict(original, replay, bool(first["higher_is_better"]))
    if noise in ("within noise", "same"):
        return MetricJudgement(name, unit, original, replay, band, "within noise", how)
    outside = f"{replay.median:.6g} outside {band[0]:.6g}..{band[1]:.6g} (±{tolerance:.0%})"
    return MetricJudgement(name, unit, original, replay, band, "differs",
                           f"{outside}; {NOISE_UNKNOWN}" if how == NOISE_UNKNOWN else f"{outside}; {how}")
