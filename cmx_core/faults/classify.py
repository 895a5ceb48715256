"""The fault class of a failed attempt (docs/faults.md), from what the failure shows.

The step's exit and the cause its own evidence shows (:mod:`cmx_core.faults.causes`) decide,
first match wins: exit code 2 or a refused input is ``bad_input`` (never retried); the causes
``oom``/``cuda_oom`` are ``oom``, ``time_limit`` is ``timeout``, ``disk_full`` is
``disk_full``, ``nccl`` or an unreachable network in the logs is ``network``; the causes
``killed``/``terminated`` (a lost training rank's too) and death by any other signal are
``killed``; anything else is ``exit_code``. The cluster
executors add ``node_lost`` and ``preempted`` from what their schedulers report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cmx_core.faults.causes import exit_signal
from cmx_core.providers.recovery import FaultClass

_BY_CAUSE = {"oom": FaultClass.OOM, "cuda_oom": FaultClass.OOM, "time_limit": FaultClass.TIMEOUT,
             "disk_full": FaultClass.DISK_FULL, "nccl": FaultClass.NETWORK}
_BY_SIGNAL = ("killed", "terminated")
_NETWORK = re.compile(r"Network is unreachable|No route to host|Temporary failure in name resolution")
_EXIT = re.compile(r"exited with code (-?\d+)")


def fault_class(message: str, exit_code: int, cause: str | None, logs: Sequence[Path] = ()) -> FaultClass:
    """The class of a failure (see the module docstring)."""
    found = _EXIT.search(message)
    if exit_code == 2 or (found is not None and int(found.group(1)) == 2):
        return FaultClass.BAD_INPUT
    if cause in _BY_CAUSE:
        return _BY_CAUSE[cause]
    if _NETWORK.search(message) or any(_NETWORK.search(_text(log)) for log in logs):
        return FaultClass.NETWORK
    if cause in _BY_SIGNAL or exit_signal(message) is not None:
        return FaultClass.KILLED
    return FaultClass.EXIT_CODE


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-20000:]
    except OSError:
        return ""
