"""The application metrics channel: what a step reports of its own progress.

A Python step calls ``ctx.report("completed_queries", 120)`` (or ``kind="counter"`` for a
running total); a shell or container step appends lines to the file named by the
environment variable ``CMX_METRICS_FILE``::

    completed_queries 120
    tokens 5120 counter

one ``NAME[{LABELS}] VALUE [gauge|counter]`` per line (``NAME``: letters, digits, ``_``;
``VALUE`` a number; ``LABELS`` optional, as in Prometheus' text: ``loss{rank="1"} 2.3``). The
sampler reads what was reported at each round; a series is ``cmx_app_<NAME>`` (``_total``
added to a counter's samples) with the labels ``run``, ``node`` and ``step`` (``<node
id>/<step id>``) and the step's own (``rank``, say: one series per rank). A line that does not
parse is skipped and said once in the result's ``telemetry.unavailable``; a run keeps at most
:data:`MAX_SERIES` application series (memory stays bounded whatever a step reports).
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.telemetry.journal import Journal

ENV_FILE = "CMX_METRICS_FILE"
FILE_NAME = "app_metrics.txt"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_NAMED = re.compile(r"^([^{]*)\{(.*)\}$")
_LABEL = re.compile(r'^([a-z_][a-z0-9_]{0,49})="([^"\\\s,{}]{0,100})"$')
KINDS = ("gauge", "counter")
RESERVED_LABELS = ("run", "node", "step")
"""Labels cmx sets on every application series itself."""
MAX_LABELS = 4
MAX_SERIES = 1000
"""The most application series one run keeps (name, step and labels); more are dropped, said once."""

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class AppValue:
    """The latest value of one application series."""

    name: str
    step: str
    value: float
    kind: str
    at: float = 0.0
    """When it was reported or read (``time.monotonic()``): the progress line shows a step
    only what it reported since it started (:mod:`.live`)."""
    labels: Labels = ()
    """The step's own labels (``(("rank", "1"),)``), sorted by name."""


def check(name: str, value: float, kind: str) -> float:
    """``value`` as a float, or a :class:`UsageError` naming what is wrong."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"metric name {name!r}: use letters, digits and _ (not first a digit)")
    if kind not in KINDS:
        raise UsageError(f"metric {name}: kind must be gauge or counter, not {kind!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"metric {name}: value must be a finite number, not {value!r}")
    return float(value)


def check_labels(name: str, labels: object) -> Labels:
    """``labels`` (a mapping of label name to text) as sorted pairs, or a :class:`UsageError`."""
    if not labels:
        return ()
    if not isinstance(labels, dict) or len(labels) > MAX_LABELS:
        raise UsageError(f"metric {name}: labels must be a mapping of at most {MAX_LABELS} names to text")
    pairs = []
    for key, text in labels.items():
        if not isinstance(key, str) or not isinstance(text, (str, int)) or isinstance(text, bool) \
                or not _LABEL.match(f'{key}="{text}"'):
            raise UsageError(f"metric {name}: label {key!r}={text!r}: a name of a-z, 0-9, _ and a value of at most "
                             "100 characters without spaces, quotes, commas or braces")
        if key in RESERVED_LABELS:
            raise UsageError(f"metric {name}: label {key!r} is cmx's own ({', '.join(RESERVED_LABELS)}); pick another")
        pairs.append((key, str(text)))
    return tuple(sorted(pairs))


def parse_name(word: str) -> tuple[str, Labels]:
    """``loss{rank="1"}`` as ``("loss", (("rank", "1"),))``; a :class:`UsageError` if malformed."""
    named = _NAMED.match(word)
    if named is None:
        return word, ()
    name, body = named.groups()
    found: dict[str, str] = {}
    for part in filter(None, body.split(",")):
        label = _LABEL.match(part)
        if label is None:
            raise UsageError(f"label {part!r} is not name=\"value\"")
        found[label.group(1)] = label.group(2)
    return name, check_labels(name, found)


class AppSeries:
    """Every application series of a run: reported values and watched metrics files.
    Thread-safe: steps report from their own threads, the sampler reads from its own."""

    def __init__(self, journal: Journal | None = None) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str, Labels], AppValue] = {}
        self._files: dict[Path, tuple[str, int]] = {}
        self.problems: list[str] = []
        self.journal = journal
        """Where each value is also appended as it arrives (``CMX_APP_JOURNAL``), or None."""

    def report(self, step: str, name: str, value: float, kind: str = "gauge",
               labels: dict[str, str] | None = None) -> None:
        number = check(name, value, kind)
        pairs = check_labels(name, labels)
        with self._lock:
            self._keep(AppValue(name, step, number, kind, time.monotonic(), pairs))

    def _keep(self, value: AppValue) -> None:
        key = (value.name, value.step, value.labels)
        if key not in self._values and len(self._values) >= MAX_SERIES:
            self._problem(f"application series: more than {MAX_SERIES} in one run; {value.name} of {value.step} and "
                          "later new ones dropped (report fewer names or label values)")
            return
        self._values[key] = value
        if self.journal is not None:
            self.journal.add(value.name, value.step, value.labels, value.value)
            if self.journal.problem:
                self._problem(self.journal.problem)
                self.journal = None

    def watch(self, path: Path, step: str) -> None:
        """Read ``path`` (a step's metrics file) at every round from now on."""
        with self._lock:
            self._files.setdefault(path, (step, 0))

    def forget(self, step: str) -> None:
        """Drop ``step``'s values and files (a progress-only series, once the step ended)."""
        with self._lock:
            self._values = {k: v for k, v in self._values.items() if v.step != step}
            self._files = {p: (s, o) for p, (s, o) in self._files.items() if s != step}

    def snapshot(self) -> tuple[AppValue, ...]:
        """The latest value of every series, after reading what the files gained."""
        with self._lock:
            for path, (step, offset) in list(self._files.items()):
                self._files[path] = (step, self._read_file(path, step, offset))
            return tuple(self._values.values())

    def _read_file(self, path: Path, step: str, offset: int) -> int:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return offset
        except OSError as err:
            self._problem(f"metrics file {path}: {err.strerror}")
            return offset
        complete = data.rfind(b"\n") + 1  # a line still being written waits for the next round
        for raw in data[:complete].decode("utf-8", "replace").splitlines():
            self._line(raw, path, step)
        return offset + complete

    def _line(self, raw: str, path: Path, step: str) -> None:
        words = raw.split()
        if not words or words[0].startswith("#"):
            return
        try:
            if len(words) not in (2, 3):
                raise UsageError("want NAME[{LABELS}] VALUE [gauge|counter]")
            kind = words[2] if len(words) == 3 else "gauge"
            name, labels = parse_name(words[0])
            number = check(name, float(words[1]), kind)
        except (UsageError, ValueError) as err:
            self._problem(f"metrics file {path}: line {raw.strip()[:80]!r} skipped ({err})")
            return
        self._keep(AppValue(name, step, number, kind, time.monotonic(), labels))

    def _problem(self, text: str) -> None:
        if not any(p.split(":")[0] == text.split(":")[0] for p in self.problems):
            self.problems.append(text)  # said once per file


class StepMetrics:
    """What a step's context reports into (:attr:`StepContext.metrics`): one step's view of
    the run's :class:`AppSeries`, with the metrics file shell steps write."""

    def __init__(self, series: AppSeries, step: str, metrics_file: Path) -> None:
        self._series = series
        self.step = step
        self.metrics_file: Path | None = metrics_file
        series.watch(metrics_file, step)

    def report(self, name: str, value: float, kind: str = "gauge", labels: dict[str, str] | None = None) -> None:
        self._series.report(self.step, name, value, kind, labels)
