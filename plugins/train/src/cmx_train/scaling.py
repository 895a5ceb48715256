"""Scaling efficiency against the 1-process point of the same sweep, and when not to trust it.

``cmx sweep`` runs point N of sweep ID with its run directory at
``<data>/sweeps/ID/point-N/``; a throughput point therefore finds its siblings' finished
``result.json`` files beside it. The baseline is the valid 1-process (nproc x nodes = 1)
throughput point of the same model, precision, device and scaling kind, with the same global
batch (strong scaling) or the same batch per rank (weak scaling). Efficiency is
``samples/s(N) / (N x samples/s(1))`` for both kinds; in step times that reads
``t(1) / (N x t(N))`` for strong scaling (the work of a step is fixed) and ``t(1) / t(N)`` for
weak (the work of each rank is fixed). With ``-j 1`` and the nproc axis given as ``1,...``
the baseline point runs first; a point that finds none reports the efficiency as unmeasured
(``None``) rather than guessing. The input ``baseline_samples_per_s`` overrides the search.

An efficiency above :data:`SUSPECT_ABOVE` is flagged as suspect with the likely causes read
off the two records (thread counts, oversubscription, a noisy baseline), never timed again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_train.config import TrainConfig
from cmx_train.threads import sweep_of

SUSPECT_ABOVE = 1.05
"""An efficiency above this is more than linear speed-up: flagged, with its likely cause."""
NOISY_CV = 0.10
"""A baseline whose step times vary more than this (coefficient of variation) was noisy."""

FORMULA = {
    "strong": "samples/s(N) / (N x samples/s(1)) at the same global batch, i.e. t(1) / (N x t(N)) per step",
    "weak": "samples/s(N) / (N x samples/s(1)) at the same batch per rank, i.e. t(1) / t(N) per step",
}


@dataclass(frozen=True)
class Point:
    """What the efficiency and its suspicion need of one throughput point."""

    samples_per_s: float
    world_size: int
    threads_per_rank: int | None = None
    total_threads: int | None = None
    cores: int | None = None
    step_time_cv: float | None = None


@dataclass(frozen=True)
class Baseline:
    """The 1-process point a run is compared with and where it came from; ``measured`` is
    False for a given ``baseline_samples_per_s`` (nothing else is known of it)."""

    point: Point
    source: str
    measured: bool = True


@dataclass(frozen=True)
class Efficiency:
    """The efficiency of one point, its formula, and whether (and why) it is suspect."""

    scaling: str
    formula: str
    value: float | None
    suspect: bool
    causes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"scaling": self.scaling, "formula": self.formula, "value": self.value, "suspect": self.suspect,
                "suspect_above": SUSPECT_ABOVE, "causes": list(self.causes)}

    def warning(self) -> str | None:
        """The one line that says so, or None when the value is not suspect."""
        if not self.suspect or self.value is None:
            return None
        return (f"scaling_efficiency {self.value:.3g} is above {SUSPECT_ABOVE} and suspect: "
                + "; ".join(self.causes))


def efficiency(scaling: str, point: Point | None, baseline: Baseline | None) -> Efficiency:
    """``samples/s(N) / (N x samples/s(1))``, flagged above :data:`SUSPECT_ABOVE`; unmeasured
    (``value`` None) without a measured point or a baseline."""
    if point is None or baseline is None or baseline.point.samples_per_s <= 0 or point.samples_per_s <= 0:
        return Efficiency(scaling, FORMULA[scaling], None, False, ())
    value = point.samples_per_s / (point.world_size * baseline.point.samples_per_s)
    if value <= SUSPECT_ABOVE:
        return Efficiency(scaling, FORMULA[scaling], value, False, ())
    return Efficiency(scaling, FORMULA[scaling], value, True, suspect_causes(scaling, point, baseline))


def suspect_causes(scaling: str, point: Point, baseline: Baseline) -> tuple[str, ...]:
    """The likely causes of a more than linear speed-up, read off the two records."""
    base = baseline.point
    if not baseline.measured:
        return (f"the baseline was given ({baseline.source}), not measured beside this point: its threads and "
                "noise are unknown",)
    causes = []
    if base.threads_per_rank is None or point.threads_per_rank is None:
        causes.append("threads per rank were not recorded at " + ("the baseline" if base.threads_per_rank is None
                                                                   else "this point"))
    elif base.threads_per_rank < point.threads_per_rank:
        causes.append(f"fewer threads at the baseline: {base.threads_per_rank} per rank at 1 process, "
                      f"{point.threads_per_rank} per rank here")
    elif base.threads_per_rank != point.threads_per_rank:
        causes.append(f"threads per rank differ between points: {base.threads_per_rank} at the baseline, "
                      f"{point.threads_per_rank} here")
    if base.total_threads is not None and base.cores is not None and base.total_threads > base.cores:
        causes.append(f"the baseline oversubscribed the CPUs: {base.total_threads} threads on {base.cores} cores")
    if base.step_time_cv is not None and base.step_time_cv > NOISY_CV:
        causes.append(f"the baseline point was noisy: its step times vary by CV {base.step_time_cv:.2f} "
                      f"(above {NOISY_CV}); repeat it on a quiet machine")
    if not causes:
        why = ("a smaller batch per rank can fit the caches better" if scaling == "strong"
               else "the ranks may share caches or memory bandwidth unevenly")
        causes.append(f"no recorded cause ({why}); repeat the baseline point to confirm it")
    return tuple(causes)


def point_of(document: Mapping[str, Any]) -> Point | None:
    """The :class:`Point` of a stored result document, or None when it has no samples/s."""
    section = document.get("train") or {}
    value = ((document.get("metrics") or {}).get("samples_per_second") or {}).get("value")
    if not isinstance(value, (int, float)) or value <= 0:
        return None
    threads = section.get("threads") or {}
    return Point(float(value), int(section.get("world_size") or 1), _int(threads.get("per_rank")),
                 _int(threads.get("total")), _int(threads.get("cores")), _float(section.get("step_time_cv")))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _same(section: Mapping[str, Any], config: TrainConfig) -> bool:
    scaling = section.get("scaling") or "strong"  # a result from before the kind was recorded was strong
    batch = (section.get("global_batch_size") == config.global_batch_size if config.scaling == "strong"
             else section.get("per_rank_batch_size") == config.per_rank_batch)
    return (section.get("mode") == "throughput" and section.get("world_size") == 1 and scaling == config.scaling
            and (section.get("model") or {}).get("name") == config.model
            and section.get("precision") == config.precision and section.get("device") == config.device and batch)


def baseline_from_sweep(run_dir: Path, config: TrainConfig) -> Baseline | None:
    """The 1-process point of this run's sweep, or None outside a sweep or before that point
    has finished."""
    sweep = sweep_of(run_dir)
    if config.mode != "throughput" or sweep is None:
        return None
    for sibling in sorted(sweep.glob("point-*/result.json")):
        try:
            document = json.loads(sibling.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        point = point_of(document)
        if document.get("status") == "valid" and _same(document.get("train") or {}, config) and point is not None:
            return Baseline(point, f"sweep {sweep.name} {sibling.parent.name} (run {document.get('run_id')})")
    return None
