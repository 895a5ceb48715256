"""Each rank's live training series on the step's application channel.

The step hands the launch the file that ``CMX_METRICS_FILE`` names; every rank appends its own
lines to it, at most every :data:`REPORT_EVERY_S` and once when it stops training::

    train_loss{rank="1"} 2.2913
    train_step_time_seconds{rank="1"} 0.0121
    train_samples_per_second{rank="1"} 1320.5
    train_samples{rank="1"} 4096 counter

so the run's telemetry (``telemetry.om``, ``/metrics``, the progress line) has one series per
rank as it trains: its own loss (before the ranks' mean), its last step's time, its samples
per second since its previous report, and its samples so far (warm-up steps included). They
are progress, not the result: the result's figures come from the timed window of every rank.
Rank 0 also reports the run's ``progress`` (the fraction of its steps done), which
``--inject kill-step@50%`` waits for (docs/faults.md): at once each time it passes a tenth,
so the strike comes at its moment however fast the steps are.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

ENV_FILE = "CMX_METRICS_FILE"
REPORT_EVERY_S = 0.5


class RankProgress:
    """One rank's reporter; a no-op without a metrics file (a run without telemetry)."""

    def __init__(self, path: str | None, rank: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path or None
        self._label = f'{{rank="{rank}"}}'
        self._rank = rank
        self._fraction: float | None = None
        self._clock = clock
        self._since = clock()
        self._samples = 0
        self._pending = 0
        self._last: tuple[float, Callable[[], float]] | None = None

    @classmethod
    def from_env(cls, rank: int) -> RankProgress:
        return cls(os.environ.get(ENV_FILE), rank)

    def step(self, samples: int, seconds: float, loss: Callable[[], float], fraction: float | None = None) -> None:
        """One training step of ``samples`` that took ``seconds``; ``loss`` is read only when
        a report is due (on a GPU reading it waits for the device); ``fraction``: of the run's
        steps done (rank 0 reports it)."""
        if self._path is None:
            return
        crossed = False
        if fraction is not None and self._rank == 0:
            crossed = int(fraction * 10) > int((self._fraction or 0.0) * 10)
            self._fraction = fraction
        self._samples += samples
        self._pending += samples
        self._last = (seconds, loss)
        if crossed or self._clock() - self._since >= REPORT_EVERY_S:
            self._report(self._path)

    def close(self) -> None:
        """Report what the last report did not include."""
        if self._path is not None and self._pending:
            self._report(self._path)

    def _report(self, path: str) -> None:
        now = self._clock()
        elapsed = max(now - self._since, 1e-9)
        lines = [f"train_samples{self._label} {self._samples} counter",
                 f"train_samples_per_second{self._label} {self._pending / elapsed:.6g}"]
        if self._last is not None:
            seconds, loss = self._last
            lines += [f"train_step_time_seconds{self._label} {seconds:.6g}", f"train_loss{self._label} {loss():.6g}"]
        if self._fraction is not None:
            lines.append(f"progress {self._fraction:.6g}")
        self._since, self._pending = now, 0
        text = "".join(f"{line}\n" for line in lines).encode()
        # one write in append mode: the ranks' lines do not interleave mid-line
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, text)
        finally:
            os.close(fd)
