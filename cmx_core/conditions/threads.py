"""The thread settings a workload ran with: the OpenMP/BLAS environment variables, and
torch's intra/inter-op thread counts when the run has torch loaded (never imported here)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from cmx_core.conditions.values import Read, known, unknown

ENV_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_settings(env: Mapping[str, str]) -> dict[str, Read[Any]]:
    """Each variable (unknown "not set" when absent: the library then picks its own count)
    and torch's counts (unknown when no step loaded torch in this process)."""
    found: dict[str, Read[Any]] = {
        name: known(env[name]) if name in env else unknown("not set: the library picks (often every CPU)")
        for name in ENV_THREADS
    }
    torch: Any = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        why = "torch not loaded in the cmx process (a step in a subprocess sets its own)"
        found["torch_intra_op"] = found["torch_inter_op"] = unknown(why)
    else:
        found["torch_intra_op"] = known(int(torch.get_num_threads()))
        found["torch_inter_op"] = known(int(torch.get_num_interop_threads()))
    return found
