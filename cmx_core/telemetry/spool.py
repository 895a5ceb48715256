"""The run's samples on disk as they are taken, so the sampler's memory does not grow with the run.

OpenMetrics wants a family's samples together and each series' samples contiguous, while
rounds arrive one instant at a time across every series. So each round's sample lines are
appended, a batch at a time (:data:`FLUSH_LINES` lines or :data:`FLUSH_S` seconds, whichever
comes first), to one spool file per series in ``telemetry.om.d/`` beside the run's
``telemetry.om``; :meth:`SeriesSpool.finish` joins them, family after family, into
``telemetry.om`` by copying (constant memory) and removes the directory. What the sampler
holds meanwhile is one entry per series (not per sample) and at most one batch of lines.
A run killed before it finished leaves its samples in ``telemetry.om.d/``, one file per
series in time order.

Timestamps are written in milliseconds and each round's is later than the one before: a
series' timestamps must increase in OpenMetrics, and a reader (prometheus_client's parser)
drops a sample whose timestamp repeats the one before it. Two rounds in one millisecond (a
last round right after a sampled one, on a fast machine) or a wall clock set back would lose
samples, so a round is stamped 1 ms after the one before where its own time is not later.
"""

from __future__ import annotations

import array
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx_core.telemetry.names import BY_NAME
from cmx_core.telemetry.openmetrics import family_of, label_text, number_text
from cmx_core.telemetry.probes import Labels

FLUSH_LINES = 1024
FLUSH_S = 10.0
SPOOL_SUFFIX = ".d"


@dataclass(frozen=True)
class Series:
    """One spooled series: its family, its labels (base labels first) and its file's number."""

    name: str
    labels: Labels
    index: int


class SeriesSpool:
    """Sample lines of ``telemetry.om``, spooled per series under ``<path>.d``."""

    def __init__(self, path: Path, base: Labels, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.dir = path.with_name(path.name + SPOOL_SUFFIX)
        self._base = base
        self._clock = clock
        self._series: dict[tuple[str, Labels], Series] = {}
        self._kinds: dict[str, str] = {}
        self._pending: dict[int, list[str]] = {}
        self._lines = 0
        self._last_ms = -1
        self._flushed_at = clock()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)

    def add(self, t: float, points: tuple[tuple[str, Labels, float], ...], kinds: Mapping[str, str]) -> None:
        """Spool one round's points taken at Unix time ``t`` (stamped later than the round before)."""
        self._last_ms = max(round(t * 1000), self._last_ms + 1)
        stamp = f"{self._last_ms // 1000}.{self._last_ms % 1000:03d}"
        for name, labels, value in points:
            series = self._series.get((name, labels))
            if series is None:
                series = Series(name, (*self._base, *labels), len(self._series))
                self._series[(name, labels)] = series
                self._kinds.setdefault(name, kinds.get(name, "gauge"))
            family = family_of(name, self._kinds[name])
            line = f"{family.sample_name}{label_text(series.labels)} {number_text(value)} {stamp}\n"
            self._pending.setdefault(series.index, []).append(line)
        self._lines += len(points)
        if self._lines >= FLUSH_LINES or self._clock() - self._flushed_at >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Append every pending line to its series' file."""
        for index, lines in self._pending.items():
            with open(self._file(index), "a") as handle:
                handle.writelines(lines)
        self._pending.clear()
        self._lines = 0
        self._flushed_at = self._clock()

    def drop_pending(self) -> None:
        """Forget the lines not yet written (a flush failed: they would only pile up)."""
        self._pending.clear()
        self._lines = 0

    def _file(self, index: int) -> Path:
        return self.dir / f"{index}.om"

    @property
    def series_count(self) -> int:
        return len(self._series)

    def values(self, name: str) -> Iterator[array.array[float]]:
        """Every value of family ``name``, one array per series (what is pending is written first)."""
        self.flush()
        for series in self._series.values():
            if series.name == name and self._file(series.index).exists():
                with open(self._file(series.index)) as handle:
                    yield array.array("d", (float(line.rsplit(" ", 2)[1]) for line in handle))

    def finish(self) -> None:
        """Join the spool into ``telemetry.om`` (written whole, then renamed) and remove it."""
        self.flush()  # nothing pending after a failed flush: see drop_pending
        names = sorted({s.name for s in self._series.values()}, key=_order)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as out:
            for name in names:
                out.write(header(name, self._kinds[name]))
                for series in self._series.values():
                    if series.name == name and self._file(series.index).exists():
                        with open(self._file(series.index)) as part:
                            shutil.copyfileobj(part, out)
            out.write("# EOF\n")
        tmp.replace(self.path)
        shutil.rmtree(self.dir, ignore_errors=True)


def header(name: str, kind: str) -> str:
    """``# TYPE``, ``# UNIT`` (where the family has one) and ``# HELP`` of a family."""
    family = family_of(name, kind)
    lines = [f"# TYPE {name} {family.kind}"]
    if family.unit and name.endswith("_" + family.unit):
        lines.append(f"# UNIT {name} {family.unit}")
    lines.append(f"# HELP {name} {_escape(family.help)}")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _order(name: str) -> tuple[int, str]:
    """Known families in the catalog's order, application series after them."""
    names = list(BY_NAME)
    return (names.index(name), "") if name in BY_NAME else (len(names), name)
