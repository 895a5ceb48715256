"""Scaling efficiency against the 1-process point of the same sweep.

``cmx sweep`` runs point N of sweep ID with its run directory at
``<data>/sweeps/ID/point-N/``; a throughput point therefore finds its siblings' finished
``result.json`` files beside it. The baseline is the valid 1-process (nproc x nodes = 1)
throughput point of the same model, precision, device and global batch; efficiency is
``samples/s(N) / (N x samples/s(1))``. With ``-j 1`` and the nproc axis given as ``1,...``
the baseline point runs first; a point that finds none reports the efficiency as unmeasured
(``None``) rather than guessing. The input ``baseline_samples_per_s`` overrides the search.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cmx_train.config import TrainConfig

POINT = re.compile(r"^point-(\d+)$")


def _same(section: dict[str, Any], config: TrainConfig) -> bool:
    return (section.get("mode") == "throughput" and section.get("world_size") == 1
            and (section.get("model") or {}).get("name") == config.model
            and section.get("precision") == config.precision and section.get("device") == config.device
            and section.get("global_batch_size") == config.batch_size)


def baseline_from_sweep(run_dir: Path, config: TrainConfig) -> tuple[float, str] | None:
    """(samples/s of the 1-process point, where it came from), or None outside a sweep or
    before that point has finished."""
    if config.mode != "throughput" or not POINT.match(run_dir.name) or not run_dir.parent.name.startswith("sw-"):
        return None
    for sibling in sorted(run_dir.parent.glob("point-*/result.json")):
        try:
            document = json.loads(sibling.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        section = document.get("train") or {}
        value = ((document.get("metrics") or {}).get("samples_per_second") or {}).get("value")
        if document.get("status") == "valid" and _same(section, config) and isinstance(value, (int, float)) \
                and value > 0:
            return float(value), f"sweep {run_dir.parent.name} {sibling.parent.name} (run {document.get('run_id')})"
    return None
