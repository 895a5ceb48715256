"""Progress on stderr while a run goes on, also with ``--json`` (stdout keeps its one JSON
document) and silent with ``-q``.

* A line when each node starts and one when it finishes, with its time. Cached nodes are
  silent unless ``-v``.
* While a step runs, a live line (:mod:`.progress_line`): its phase (node, step, step type),
  elapsed time, the step's own series from the application channel and the run's CPU and
  memory. On a terminal it redraws one status line (rich, imported only once a node actually
  runs, so a fully cached run never pays for it); otherwise it prints a plain line every
  :data:`PLAIN_EVERY_S` seconds per running step, never per event.
* Steps' ``ctx.log.info`` lines, as ``cmx: ...``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from cmx_core.cli.progress_line import node_line, step_line
from cmx_core.errors import escape_controls
from cmx_core.plugins.hookspecs import hookimpl
from cmx_core.plugins.loader import get_registry
from cmx_core.telemetry.collector import latest_usage
from cmx_core.telemetry.live import BOARD

PLAIN_EVERY_S = 1.0
"""How often a pipe or a CI log gets a live line of each running step."""
TERMINAL_EVERY_S = 0.5
"""How often a terminal's status line is redrawn."""


class Progress:
    """A pluggy plugin registered for the duration of a ``with`` block."""

    def __init__(self, enabled: bool = True, verbose: bool = False, *, tty: bool | None = None,
                 every_s: float | None = None) -> None:
        self.enabled = enabled
        self.verbose = verbose
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.every_s = every_s or (TERMINAL_EVERY_S if self.tty else PLAIN_EVERY_S)
        self._status: Any = None
        self._nodes: dict[str, tuple[str, float]] = {}
        self._step_log: Any = None
        self._print_lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            get_registry().manager.register(self, name="cmx-progress")
            self._ticker = threading.Thread(target=self._tick, name="cmx-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._status is not None:
            self._status.stop()
        if self._step_log is not None:
            logging.getLogger("cmx.step").removeHandler(self._step_log)
        if self.enabled:
            manager = get_registry().manager
            if manager.is_registered(self):
                manager.unregister(self)

    @hookimpl
    def cmx_node_started(self, node_id: str, recipe: str, cached: bool) -> None:
        if cached:
            return
        self._nodes[node_id] = (recipe, time.monotonic())
        self._show_step_log()
        if self.tty:
            if self._status is None:
                self._status = _terminal_line(f"running {node_id}")
            else:
                self._status.update(f"running {node_id}")
        else:
            self._say(f"running {node_id} ({recipe})")

    @hookimpl
    def cmx_node_finished(self, node_id: str, recipe: str, outputs: Mapping[str, Any],
                          wall_s: float, cached: bool) -> None:
        self._nodes.pop(node_id, None)
        if cached and not self.verbose:
            return
        how = "cached" if cached else f"{wall_s:.2f} s"
        self._say(f"done {node_id} ({how})")

    @hookimpl
    def cmx_node_failed(self, node_id: str, recipe: str, error: str, wall_s: float) -> None:
        self._nodes.pop(node_id, None)

    def live_lines(self) -> list[str]:
        """A line for each step running for at least half of :attr:`every_s` (so the first
        comes one tick after it started), and for each running node none of whose steps runs
        in this process (a remote executor's)."""
        now, usage, shown_after = time.monotonic(), latest_usage(), self.every_s / 2
        steps = [s for s in BOARD.steps() if now - s.started >= shown_after]
        lines = [step_line(s, now, BOARD.reported(s), usage) for s in steps]
        on_board = {s.node_id for s in BOARD.steps()}
        for node_id, (recipe, started) in list(self._nodes.items()):
            if node_id not in on_board and now - started >= shown_after:
                lines.append(node_line(node_id, recipe, now - started, usage))
        return lines

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            lines = self.live_lines()
            if not lines:
                continue
            if self._status is not None:
                self._status.update(" · ".join(lines))
            elif not self.tty:
                for line in lines:
                    self._say(line)

    def _say(self, text: str) -> None:
        with self._print_lock:  # one whole line at a time from the ticker and the steps' threads
            sys.stderr.write(f"cmx: {escape_controls(text)}\n")
            sys.stderr.flush()

    def _show_step_log(self) -> None:
        """Steps' ``ctx.log.info`` lines (a LoadGen test's expected duration, an image built or
        cached) go to stderr as ``cmx: ...`` while progress is shown; set up when the first node
        runs, so a fully cached run never imports :mod:`logging`."""
        if self._step_log is not None:
            return

        say = self._say

        class _StderrLines(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:  # the current stderr: rich may proxy it
                say(self.format(record))

        level = logging.DEBUG if self.verbose else logging.INFO  # -v: steps' debug lines too
        self._step_log = _StderrLines(level)
        logger = logging.getLogger("cmx.step")
        logger.addHandler(self._step_log)
        if logger.level == logging.NOTSET or logger.level > level:
            logger.setLevel(level)


class _TerminalLine:
    """A spinner and one line of text, redrawn in place on stderr (rich's ``Live``).

    It leaves ``sys.stdout`` alone (``redirect_stdout=False``): ``cmx run`` points
    ``sys.stdout`` at stderr while the steps run and back afterwards, and a ``Live`` that
    redirected it would put it back to stderr when it stops, after that: the one ``--json``
    document would land on stderr."""

    def __init__(self, live: Any, spinner: Any) -> None:
        self._live = live
        self._spinner = spinner

    def update(self, text: str) -> None:
        self._spinner.update(text=escape_controls(text))

    def stop(self) -> None:
        self._live.stop()


def _terminal_line(text: str) -> _TerminalLine:
    from rich.console import Console  # deferred: rich is heavy, only a terminal's running node needs it
    from rich.live import Live  # deferred: as above
    from rich.spinner import Spinner  # deferred: as above

    spinner = Spinner("dots", text=text)
    live = Live(spinner, console=Console(stderr=True), transient=True, redirect_stdout=False,
                redirect_stderr=True, refresh_per_second=12.5)
    live.start()
    return _TerminalLine(live, spinner)
