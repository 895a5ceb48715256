"""The sampler thread: one reading of every device each period, during the LoadGen test.

The thread sleeps in :meth:`threading.Event.wait` between rounds, so it costs the test one
short GIL hold per period (NVML calls themselves release the GIL: ctypes); the first and last
rounds are taken in :meth:`PowerSampler.start` and :meth:`PowerSampler.stop`, so an energy
counter covers exactly the window between them. A read that raises ends the sampling with
the reason kept in :attr:`Session.error` (the energy is then not reported: the window is
not covered).
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cmx_core.telemetry.reading import PowerSource, Reading, one_line

SERIES_FILE = "power_series.csv"
SERIES_COLUMNS = ("t_s", "device", "power_w", "energy_j", "gpu_util_pct", "mem_used_mib")


@dataclass(frozen=True)
class Round:
    """All devices at one instant; ``t_s`` is seconds since the first round."""

    t_s: float
    readings: tuple[Reading, ...]


@dataclass(frozen=True)
class Session:
    """What one sampling session collected."""

    source: str
    devices: tuple[str, ...]
    period_s: float
    rounds: tuple[Round, ...]
    error: str | None = None


class PowerSampler:
    """Samples ``source`` every ``period_s`` on its own daemon thread. ``clock`` is
    ``time.monotonic`` unless a test drives it (a recording replay's recorded clock)."""

    def __init__(self, source: PowerSource, period_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.period_s = period_s
        self._clock = clock
        self._t0: float | None = None
        self._rounds: list[Round] = []
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one round now (the thread's body; tests call it directly)."""
        now = self._clock()
        if self._t0 is None:
            self._t0 = now
        readings = self.source.read()
        self._rounds.append(Round(now - self._t0, readings))

    def _guarded(self) -> bool:
        try:
            self.sample()
        except Exception as err:  # noqa: BLE001 - a failed read ends sampling; the reason is kept
            at = self._rounds[-1].t_s if self._rounds else 0.0
            self._error = f"{self.source.name} read failed after {at:.3f} s: {one_line(err)}"
            return False
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            if not self._guarded():
                return

    def start(self, thread: bool = True) -> None:
        """The first round, then (``thread``) the sampling thread."""
        if self._guarded() and thread:
            self._thread = threading.Thread(target=self._loop, name="cmx-power-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> Session:
        """Stop the thread, take the last round, return the session."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is None:
            self._guarded()
        return Session(self.source.name, tuple(self.source.devices), self.period_s, tuple(self._rounds),
                       self._error)


def _cell(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def write_series(session: Session, path: Path) -> int:
    """The session as CSV (one row per device per round; ``energy_j`` counted from the
    device's first reading; empty cells where the device does not report a value).
    Returns the number of rows."""
    first: dict[str, float] = {}
    rows = 0
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SERIES_COLUMNS)
        for rnd in session.rounds:
            for r in rnd.readings:
                if r.energy_j is not None:
                    first.setdefault(r.device, r.energy_j)
                energy = None if r.energy_j is None else r.energy_j - first[r.device]
                writer.writerow((f"{rnd.t_s:.4f}", r.device, _cell(r.power_w, 3), _cell(energy, 4),
                                 _cell(r.util_pct, 1), _cell(r.mem_used_mib, 1)))
                rows += 1
    return rows
