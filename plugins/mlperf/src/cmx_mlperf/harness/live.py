"""The LoadGen test's live progress, from the child process to ``cmx run``'s progress line.

While LoadGen runs, a thread of the child appends to the file ``CMX_METRICS_FILE`` names (the
line protocol of cmx-core's application channel, docs/telemetry.md) every second, and once
more when the test ends::

    completed_samples 1200 counter
    live_samples_per_second 98.7
    completed_tokens 76800 counter        # a SUT that reports tokens (the LLM SUTs)
    live_tokens_per_second 6316.8

The numbers are what the SUT completed to LoadGen (:meth:`LoadgenCompleter.completed`,
tallied only while this report is on) over the time since the test started. They are
progress, not the result: the result's QPS and tokens/s are LoadGen's own, from its logs.
A SUT that completes nothing yet reports zeros.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cmx_mlperf.harness.completer import LoadgenCompleter

ENV_FILE = "CMX_METRICS_FILE"
EVERY_S = 1.0


def metrics_file() -> Path | None:
    """The channel's file, from the environment the parent step gave the child."""
    value = os.environ.get(ENV_FILE)
    return Path(value) if value else None


def progress_lines(samples: int, tokens: int, elapsed_s: float) -> str:
    """The lines of one report (tokens only once a SUT has reported some)."""
    rate = samples / elapsed_s if elapsed_s > 0 else 0.0
    lines = [f"completed_samples {samples} counter", f"live_samples_per_second {rate:.6g}"]
    if tokens:
        lines += [f"completed_tokens {tokens} counter", f"live_tokens_per_second {tokens / elapsed_s:.6g}"]
    return "".join(line + "\n" for line in lines)


class LiveReport:
    """A ``with`` block around the LoadGen test; does nothing without a metrics file."""

    def __init__(self, completer: LoadgenCompleter, path: Path | None, *, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._completer = completer
        self._path = path
        self._every_s = every_s
        self._clock = clock
        self._began = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LiveReport:
        self._began = self._clock()
        if self._path is not None:
            self._completer.tally(True)
            self._thread = threading.Thread(target=self._loop, name="cmx-loadgen-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.write()  # the test's last count
            self._completer.tally(False)

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            self.write()

    def write(self) -> None:
        """Append one report. A write that fails stops the reports, said once in the child's
        log: progress must not fail the test."""
        if self._path is None:
            return
        samples, tokens = self._completer.completed()
        text = progress_lines(samples, tokens, self._clock() - self._began)
        try:
            with open(self._path, "a", encoding="utf-8") as handle:
                handle.write(text)  # whole lines: the reader waits for a line's newline
        except OSError as err:
            print(f"cmx_mlperf: live progress stopped: {self._path}: {err.strerror}", file=sys.stderr)
            self._path = None
