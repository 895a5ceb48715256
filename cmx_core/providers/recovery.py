"""Recovery records every layer shares (docs/faults.md): the fault classes and kinds, a
step's recovery policy and checkpoint, the faults a run injects, and what the run was asked.

Recipes declare policies (:mod:`cmx_core.recipes.retries` parses them); the command line
may override them and add injections (:class:`Recovery`, carried by the execution request).
How each fault is parsed, checked and armed is :mod:`cmx_core.faults`; the two names live
here, at the bottom, because the records every executor returns carry them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class FaultClass(str, Enum):
    """How a failed attempt failed (:func:`cmx_core.faults.classify.fault_class` assigns it).
    The value is the spelling results, recipes (``retries: {on: [...]}``), the command line
    and the docs use; ``str()`` and f-strings give it too."""

    NODE_LOST = "node_lost"
    PREEMPTED = "preempted"
    TIMEOUT = "timeout"
    OOM = "oom"
    DISK_FULL = "disk_full"
    KILLED = "killed"
    NETWORK = "network"
    EXIT_CODE = "exit_code"
    BAD_INPUT = "bad_input"

    def __str__(self) -> str:
        return self.value


class FaultKind(str):
    """The name of an injectable fault, as ``--inject`` spells it (``kill-step``).

    A typed name rather than an enum: an enum is closed, so each new fault would also edit
    the file that lists them; this way a new fault is one new file in
    :mod:`cmx_core.faults.kinds` (which defines its kind) plus its registration line. The
    built-in kinds are ``KIND`` of each of those files (``kill-step``, ``oom``,
    ``disk-full``, ``partition``, ``kill-worker``)."""

    __slots__ = ()


RETRYABLE = (FaultClass.NODE_LOST, FaultClass.PREEMPTED, FaultClass.TIMEOUT, FaultClass.OOM, FaultClass.DISK_FULL,
             FaultClass.KILLED, FaultClass.NETWORK, FaultClass.EXIT_CODE)
"""The fault classes a policy may retry."""
BAD_INPUT = FaultClass.BAD_INPUT
FAULT_CLASSES = (*RETRYABLE, BAD_INPUT)


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failed step is run again, after how long, for which fault classes."""

    max: int = 0
    backoff_s: float = 0.0
    on: tuple[FaultClass, ...] = RETRYABLE

    def retries(self, fault: FaultClass, attempt: int) -> bool:
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
    mark or a size limit; its injector in :mod:`cmx_core.faults.kinds` parses it)."""

    fault: FaultKind
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
