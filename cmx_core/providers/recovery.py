"""Recovery records every layer shares (docs/faults.md): the fault classes, a step's
recovery policy and checkpoint, the faults a run injects, and what the run was asked.

Recipes declare policies (:mod:`cmx_core.recipes.retries` parses them); the command line
may override them and add injections (:class:`Recovery`, carried by the execution request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RETRYABLE = ("node_lost", "preempted", "timeout", "oom", "disk_full", "killed", "network", "exit_code")
"""The fault classes a policy may retry (:mod:`cmx_core.run.faults` assigns them)."""
BAD_INPUT = "bad_input"
FAULT_CLASSES = (*RETRYABLE, BAD_INPUT)


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failed step is run again, after how long, for which fault classes."""

    max: int = 0
    backoff_s: float = 0.0
    on: tuple[str, ...] = RETRYABLE

    def retries(self, fault: str, attempt: int) -> bool:
        """Whether attempt number ``attempt`` (1-based), failed with ``fault``, is run again."""
        return fault != BAD_INPUT and fault in self.on and attempt <= self.max

    def wait_s(self, attempt: int) -> float:
        """The backoff before the attempt after ``attempt``: doubled each retry."""
        return self.backoff_s * float(2 ** max(attempt - 1, 0))


NO_RETRIES = RetryPolicy()


@dataclass(frozen=True)
class CheckpointSpec:
    """A step's checkpoint directory; ``keep``: not removed when the run succeeds."""

    keep: bool = False


@dataclass(frozen=True)
class Injection:
    """One fault to inject (``--inject FAULT[@WHEN]``): what, and when (a time, a progress
    mark or a size limit; :mod:`cmx_core.run.inject`)."""

    fault: str
    after_s: float | None = None
    at_progress: float | None = None
    limit_bytes: int | None = None
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"fault": self.fault, "spec": self.text, "after_s": self.after_s,
                "at_progress": self.at_progress, "limit_bytes": self.limit_bytes}


@dataclass(frozen=True)
class Recovery:
    """What the command line asked of a run's recovery: a policy over the recipes' own
    (None: theirs) and the faults to inject on each step's first attempt."""

    retries: RetryPolicy | None = None
    injections: tuple[Injection, ...] = ()


NO_RECOVERY = Recovery()
