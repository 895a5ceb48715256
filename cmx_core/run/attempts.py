"""A step's attempts under its recovery policy (docs/faults.md): which policy applies, what
one failed attempt lost, and the thread-safe log of every attempt of a run."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cmx_core.providers.attempts import Attempt
from cmx_core.providers.recovery import NO_RETRIES, Recovery, RetryPolicy
from cmx_core.recipes.model import Recipe, StepSpec
from cmx_core.run import checkpoints


def policy_for(recovery: Recovery, recipe: Recipe, step: StepSpec) -> RetryPolicy:
    """The command line's policy, else the step's, else the recipe's, else no retries."""
    return recovery.retries or step.retries or recipe.retries or NO_RETRIES


def work_lost(started: float, ended: float, checkpoint: Path | None) -> float:
    """The seconds of an attempt's work the next one must redo: since the attempt's last
    checkpoint write, or all of it without one."""
    saved = checkpoints.last_write(checkpoint, started) if checkpoint is not None else None
    return max(ended - (saved if saved is not None else started), 0.0)


@dataclass
class AttemptLog:
    """Every recorded attempt of a run, in the order they ended (steps may run in threads)."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: list[Attempt] = []

    def add(self, attempt: Attempt) -> None:
        with self._lock:
            self._attempts.append(attempt)

    def all(self) -> tuple[Attempt, ...]:
        with self._lock:
            return tuple(self._attempts)


def backoff(policy: RetryPolicy, attempt: int) -> None:
    """Wait before the next attempt (interruptible: Ctrl-C ends the run)."""
    time.sleep(policy.wait_s(attempt))
