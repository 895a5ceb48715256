"""An attempt's live state on cmx-core's application channel (its docs/telemetry.md) while
the agent runs: every second ``agent_elapsed_seconds`` and ``submission_present`` (1 once the
agent has written its submission file), beside ``agent_running`` (1, then 0)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from cmx_core.api import StepContext

EVERY_S = 1.0


class AgentWatch:
    """A ``with`` block around the agent's run; its thread reports until the block ends."""

    def __init__(self, ctx: StepContext, submission: Path, *, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ctx = ctx
        self._submission = submission
        self._every_s = every_s
        self._clock = clock
        self._began = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cmx-mlebench-agent", daemon=True)

    def __enter__(self) -> AgentWatch:
        self._began = self._clock()
        self._ctx.report("agent_running", 1)
        self.report()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.report()
        self._ctx.report("agent_running", 0)

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            self.report()

    def report(self) -> None:
        self._ctx.report("agent_elapsed_seconds", round(self._clock() - self._began, 3))
        self._ctx.report("submission_present", 1 if self._submission.is_file() else 0)
