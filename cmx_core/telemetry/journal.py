"""The application journal: every value a run's steps report, one JSON line each, as it is
reported, in a file that another process reads while the run goes on.

``CMX_APP_JOURNAL=PATH`` asks a run for it (``cmx sweep --search --prune`` sets it for each
point, and reads it to stop a hopeless point early). A line is ``{"t": seconds since the run's
sampler started, "name": NAME, "step": "<node id>/<step id>", "labels": {...}, "value": V,
"n": K}``, ``K`` counting the reports of that series (1, 2, ...), so a reader that polls
still knows which report each value was. The file holds at most :data:`MAX_LINES` lines (a
step that reports without pause cannot fill the disk); then one line ``{"truncated": true}``
ends it. A write that fails stops the journal and is said once in the run's telemetry.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import IO

ENV_JOURNAL = "CMX_APP_JOURNAL"
MAX_LINES = 100_000

Labels = tuple[tuple[str, str], ...]


class Journal:
    """Appends reported values to ``path``, flushed line by line. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._handle: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the run
        self._counts: dict[tuple[str, str, Labels], int] = {}
        self._lines = 0
        self._began = time.monotonic()
        self.problem = ""

    def add(self, name: str, step: str, labels: Labels, value: float) -> None:
        with self._lock:
            if self._handle is None:
                return
            key = (name, step, labels)
            self._counts[key] = self._counts.get(key, 0) + 1
            entry = {"t": round(time.monotonic() - self._began, 3), "name": name, "step": step,
                     "labels": dict(labels), "value": value, "n": self._counts[key]}
            self._lines += 1
            self._write(entry if self._lines <= MAX_LINES else {"truncated": True})

    def _write(self, entry: dict[str, object]) -> None:
        assert self._handle is not None
        try:
            self._handle.write(json.dumps(entry) + "\n")
            self._handle.flush()
        except OSError as err:
            self.problem = f"application journal {self.path}: {err.strerror}; not written after this"
            self._close()
            return
        if "truncated" in entry:
            self._close()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
