"""The statistics of ``cmx run --runs N``: one metric over N repeats of a run, as pyperf and
hyperfine report them: mean, median, the bootstrap interval of the median
(:func:`cmx_core.results.noise.median_interval`, the replay rule's resamples and seed), the
coefficient of variation, and the outliers (a modified z-score above
:data:`OUTLIER_Z`, from the median absolute deviation, as hyperfine flags them). A CV above
:data:`CV_BOUND` is a noise warning naming what to do (docs/busy-machine.md)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.results.noise import CONFIDENCE, median_interval
from cmx_core.results.numbers import fmt_number

CV_BOUND = 0.10
"""Above this coefficient of variation the repeats are too noisy to trust (pyperf's rule)."""
OUTLIER_Z = 3.5
"""A repeat whose modified z-score (0.6745 (x - median) / MAD) exceeds this is an outlier."""


@dataclass(frozen=True)
class RepeatStats:
    metric: str
    unit: str
    values: tuple[float, ...]
    run_ids: tuple[str, ...]
    mean: float
    median: float
    interval: tuple[float, float] | None
    """The bootstrap interval of the median; None with fewer than 3 values."""
    cv: float | None
    """stdev / |mean|; None with one value or a zero mean."""
    outliers: tuple[int, ...]
    """Indices (into ``values``) of the outlying repeats."""

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv > CV_BOUND

    def warning(self) -> str | None:
        if not self.noisy or self.cv is None:
            return None
        return (f"{self.metric} varies by CV {self.cv:.1%} over {len(self.values)} runs (bound {CV_BOUND:.0%}): "
                "rerun on a quiet machine or pin with taskset (cmx system check lists the noise sources)")

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "unit": self.unit, "n": len(self.values), "values": list(self.values),
                "runs": list(self.run_ids), "mean": self.mean, "median": self.median,
                "interval": list(self.interval) if self.interval else None, "confidence": CONFIDENCE,
                "cv": self.cv, "cv_bound": CV_BOUND,
                "outliers": [{"run": self.run_ids[i], "value": self.values[i]} for i in self.outliers],
                "warning": self.warning()}

    def text(self) -> str:
        ci = (f"{CONFIDENCE:.0%} CI {fmt_number(self.interval[0])}..{fmt_number(self.interval[1])}"
              if self.interval else "CI needs 3 runs")
        cv = "CV n/a" if self.cv is None else f"CV {self.cv:.1%}"
        lines = [f"  {self.metric} ({self.unit}):",
                 f"    mean {fmt_number(self.mean)}, median {fmt_number(self.median)}, {ci}, {cv}"]
        lines += [f"    outlier: run {self.run_ids[i][:8]} {fmt_number(self.values[i])} {self.unit}"
                  for i in self.outliers]
        return "\n".join(lines)


def repeat_stats(documents: Sequence[Mapping[str, Any]]) -> list[RepeatStats]:
    """The statistics of every metric that each repeat measured with a number, the primary
    metric first."""
    if not documents:
        return []
    primary = (documents[0].get("benchmark") or {}).get("primary_metric")
    names = [name for name in (documents[0].get("metrics") or {}) if _all_numbers(documents, name)]
    names.sort(key=lambda name: name != primary)
    return [_stats(documents, name) for name in names]


def _all_numbers(documents: Sequence[Mapping[str, Any]], name: str) -> bool:
    return all(isinstance(((d.get("metrics") or {}).get(name) or {}).get("value"), (int, float))
               and not isinstance(d["metrics"][name]["value"], bool) for d in documents)


def _stats(documents: Sequence[Mapping[str, Any]], name: str) -> RepeatStats:
    values = tuple(float(d["metrics"][name]["value"]) for d in documents)
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / abs(mean) if len(values) > 1 and mean else None
    return RepeatStats(name, str(documents[0]["metrics"][name].get("unit", "")), values,
                       tuple(str(d.get("run_id", "")) for d in documents), mean, float(statistics.median(values)),
                       median_interval(values) if len(values) >= 3 else None, cv, outliers(values))


def outliers(values: Sequence[float]) -> tuple[int, ...]:
    """Indices of the values whose modified z-score exceeds :data:`OUTLIER_Z`."""
    if len(values) < 3:
        return ()
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    if mad == 0:
        return tuple(i for i, v in enumerate(values) if v != median) if len(set(values)) > 1 else ()
    return tuple(i for i, v in enumerate(values) if 0.6745 * abs(v - median) / mad > OUTLIER_Z)
