"""The largest batch that fits: each probe is a fresh launch of two training steps at one
per-rank batch size; a probe whose allocation fails (CUDA's ``OutOfMemoryError``, the CPU
allocator's ``can't allocate memory`` under the probe's ``memory_limit_mb`` address-space
budget) reports ``oom`` instead of failing. The search doubles from ``batch_size`` (per rank) until a probe runs out
of memory or ``max_batch`` is reached, then bisects between the largest fit and the first
OOM, to within 1/8 of the largest fit (each probe costs a process start). A probe on one rank
runs without torchrun (``launcher none``: the same worker, one process less). Any other
failure of a probe fails the step."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx_core.api import Launcher
from cmx_core.errors import StepFailed, UsageError
from cmx_train.config import TrainConfig
from cmx_train.launch import run


@dataclass
class Found:
    largest: int | None = None  # global: per rank x world size
    largest_per_rank: int | None = None
    first_oom: int | None = None  # the smallest per-rank batch that ran out of memory
    first_oom_message: str = ""
    capped: bool = False  # max_batch fitted: the real limit is above it
    peak_memory_bytes: int | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)


def _probe(config: TrainConfig, per_rank: int, work: Path, log: Path, found: Found,
           launchers: Mapping[str, Launcher]) -> bool:
    probe = replace(config, batch_size=per_rank, steps=2, warmup_steps=0)
    if probe.world_size == 1:
        probe = replace(probe, launcher="none")
    ranks = run(probe, work / f"probe-{per_rank}", log, launchers)
    rows = ranks.rows
    oom = [r for r in rows if r.get("oom")]
    entry = {"per_rank_batch_size": per_rank, "oom": bool(oom),
             "peak_memory_bytes": max(r["peak_memory_bytes"] for r in rows) if rows else None}
    if oom:
        entry["message"] = oom[0]["oom_message"]
        if found.first_oom is None or per_rank < found.first_oom:
            found.first_oom, found.first_oom_message = per_rank, oom[0]["oom_message"]
    elif found.largest_per_rank is None or per_rank > found.largest_per_rank:
        found.largest_per_rank, found.peak_memory_bytes = per_rank, entry["peak_memory_bytes"]
    found.probes.append(entry)
    return not oom


def search(config: TrainConfig, work: Path, log: Path, launchers: Mapping[str, Launcher]) -> Found:
    if config.device == "cpu" and config.memory_limit_mb <= 0:
        raise UsageError("train: max-batch on the CPU needs memory_limit_mb > 0 (the budget each probe may use)")
    found = Found()
    cap = max(1, config.max_batch // config.world_size)
    size = min(config.batch_size, cap)
    while True:
        if not _probe(config, size, work, log, found, launchers):
            break
        if size >= cap:
            found.capped = True
            break
        size = min(size * 2, cap)
    if found.largest_per_rank is not None and found.first_oom is not None:
        low, high = found.largest_per_rank, found.first_oom
        while high - low > max(1, low // 8):
            mid = (low + high) // 2
            if _probe(config, mid, work, log, found, launchers):
                low = mid
            else:
                high = mid
    if found.largest_per_rank is not None:
        found.largest = found.largest_per_rank * config.world_size
    if not found.probes:
        raise StepFailed("train: max-batch ran no probe")
    (work / "probes.json").write_text(json.dumps(found.probes, indent=1), encoding="utf-8")
    return found
