"""One attempt of a step, as every executor reports it (docs/faults.md).

A step that fails and is retried by its recovery policy has several attempts; each says
its number, when it started and ended, how it ended (``fault``: a class from
:class:`cmx_core.providers.recovery.FaultClass`, None for the attempt that succeeded), how
much of its work was lost and, when the fault was injected on purpose, when.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cmx_core.providers.recovery import FaultClass


@dataclass(frozen=True)
class Attempt:
    """One run of one step. ``work_lost_s``: the seconds of work the next attempt must do
    again (since the last checkpoint write, or the whole attempt without a checkpoint);
    ``injected_at``: when an injected fault struck (None: not injected, or not yet)."""

    node: str
    step: str
    number: int
    started: float
    ended: float
    fault: FaultClass | None = None
    message: str = ""
    work_lost_s: float = 0.0
    injected: str | None = None
    injected_at: float | None = None
    resumed: bool = False
    """The attempt started from a checkpoint an earlier attempt left."""

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "step": self.step, "number": self.number, "started": round(self.started, 6),
                "ended": round(self.ended, 6), "wall_s": round(self.ended - self.started, 6),
                "fault": self.fault.value if self.fault is not None else None,
                "message": self.message[:500], "work_lost_s": round(self.work_lost_s, 6),
                "injected": self.injected,
                "injected_at": round(self.injected_at, 6) if self.injected_at is not None else None,
                "resumed": self.resumed}
