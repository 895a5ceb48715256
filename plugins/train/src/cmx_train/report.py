"""The channel a user's own training script reports through (plugins/train/README.md, "Your
own training script"): one call a step, from every rank::

    from cmx_train.report import report   # the only cmx import the script needs

    for step in range(steps):
        t0 = time.perf_counter()
        ...                                 # one training step of this rank
        report(samples=batch, step_time_s=time.perf_counter() - t0, loss=float(loss))

Each call appends one line to ``rank-<RANK>.jsonl`` in the folder cmx names in
:data:`ENV`; outside cmx (the variable unset) it does nothing, so the script runs the same
with plain ``torchrun``. cmx derives samples/s, step times and the loss from those lines
(:mod:`cmx_train.user_script`). Standard library only: importing it costs nothing.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

ENV = "CMX_TRAIN_REPORT_DIR"


def report(samples: int, step_time_s: float, loss: float | None = None) -> None:
    """Record one finished training step of this rank: the samples it trained on, how long
    the step took by the script's own clock, and its loss."""
    folder = os.environ.get(ENV)
    if not folder:
        return
    rank = int(os.environ.get("RANK", "0"))
    line = {"samples": int(samples), "step_time_s": float(step_time_s), "loss": None if loss is None else float(loss),
            "t": time.monotonic(), "host": socket.gethostname(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            **_threads()}
    with open(Path(folder) / f"rank-{rank}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _threads() -> dict[str, int]:
    """torch's thread counts as the rank runs (read back, when the script uses torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    return {"threads": int(torch.get_num_threads()), "interop_threads": int(torch.get_num_interop_threads())}
