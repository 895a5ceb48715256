"""A user's own training script as the ranks' program (``script:``, plugins/train/README.md,
"Your own training script"): the launcher starts ``python SCRIPT ARGS...`` on every rank
instead of cmx's worker, and each rank's figures come from the lines the script reported
(:mod:`cmx_train.report`), in the shape the worker's ``ranks.json`` has.

A rank's timed window starts when its ``warmup_steps``-th reported step ended (at its first
step's start when there is no warm-up) and ends when its last step ended, by the script's
own monotonic clock: samples/s is the samples of the timed steps over that window, wall
time between steps included (data loading, logging), as a script that times itself with
``time.perf_counter()`` around its loop reports it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cmx_core.errors import StepFailed

REPORTS = "reports"


def rows(folder: Path, ranks: Sequence[int], warmup_steps: int) -> list[dict[str, Any]]:
    """Each of ``ranks``' figures from its report; a StepFailed naming the rank that reported
    nothing past its warm-up (the script never called ``report``, or too few times)."""
    found = []
    for rank in ranks:
        lines = _lines(folder / f"rank-{rank}.jsonl")
        if len(lines) <= warmup_steps:
            raise StepFailed(f"train: rank {rank} of the script reported {len(lines)} steps, no more than "
                             f"warmup_steps {warmup_steps}: call cmx_train.report.report(...) once a step "
                             "(plugins/train/README.md)")
        found.append(_row(rank, lines, warmup_steps))
    return found


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a killed rank
    return out


def _row(rank: int, lines: list[dict[str, Any]], warmup_steps: int) -> dict[str, Any]:
    timed = lines[warmup_steps:]
    start = lines[warmup_steps - 1]["t"] if warmup_steps else timed[0]["t"] - timed[0]["step_time_s"]
    losses = [float(x["loss"]) for x in timed if x.get("loss") is not None]
    return {"rank": rank, "host": str(timed[-1].get("host", "")), "samples": sum(int(x["samples"]) for x in timed),
            "window_s": max(0.0, float(timed[-1]["t"]) - float(start)),
            "step_times_s": [float(x["step_time_s"]) for x in timed], "losses": losses, "peak_memory_bytes": 0,
            "epochs": 0, "val_accuracy": [], "time_to_target_s": None, "epochs_to_target": None, "run_s": 0.0,
            "oom": False, "oom_message": "", "energy_j": None, "energy_source": "",
            "threads": timed[-1].get("threads", 0), "interop_threads": timed[-1].get("interop_threads", 0),
            "omp_num_threads": timed[-1].get("omp_num_threads")}


def script_record(script: str, args: list[str]) -> dict[str, Any]:
    """What the result says of the script: its path, arguments and content's digest."""
    path = Path(script)
    return {"path": str(path.resolve()), "args": args, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
