"""A point's live series, read while its run goes on: ``cmx sweep --search --prune`` hands
each point's ``cmx run`` an application journal (``CMX_APP_JOURNAL``,
:mod:`cmx_core.telemetry.journal`) and reads what it gains, so Optuna's pruner can stop a
point whose series shows it hopeless (:class:`cmx_core.sweep.search.TrialWatch`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmx_core.sweep.search import Watch


class LiveWatch:
    """The values of one series (``name``; the first step and labels that report it) in the
    journal at ``path``, told to ``watch`` as they arrive."""

    def __init__(self, path: Path, name: str, watch: Watch) -> None:
        self.path = path
        self.name = name
        self.watch = watch
        self._offset = 0
        self._key: tuple[str, str] | None = None

    def reset(self) -> None:
        """An empty journal before the point starts (a killed search's attempt left one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(b"")
        self._offset = 0

    def poll(self) -> str:
        """Read what the journal gained; a reason to prune the point now, or ""."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return ""
        complete = data.rfind(b"\n") + 1  # a line still being written waits for the next poll
        self._offset += complete
        for raw in data[:complete].splitlines():
            entry = _entry(raw)
            if entry is None or entry.get("name") != self.name:
                continue
            key = (str(entry.get("step")), json.dumps(entry.get("labels"), sort_keys=True))
            self._key = self._key or key
            if key == self._key and (reason := self.watch.seen(int(entry["n"]), float(entry["value"]))):
                return reason
        return ""


def _entry(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    good = isinstance(value, dict) and isinstance(value.get("n"), int) and isinstance(value.get("value"), (int, float))
    return value if good else None
