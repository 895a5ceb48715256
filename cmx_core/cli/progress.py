"""Progress on stderr while a run goes on: a rich spinner on a terminal, plain lines
otherwise (a pipe or a CI log gets a line when each node starts and one when it finishes,
with its time, so a long run is never silent). Cached nodes are silent unless ``-v``. rich
is imported only once a node actually runs, so a fully cached run never pays for it."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from cmx_core.plugins.hookspecs import hookimpl


class Progress:
    """A pluggy plugin registered for the duration of a ``with`` block."""

    def __init__(self, enabled: bool = True, verbose: bool = False) -> None:
        self.enabled = enabled
        self.verbose = verbose
        self._status: Any = None
        self._started: dict[str, float] = {}
        self._step_log: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from cmx_core.plugins.loader import get_registry

            get_registry().manager.register(self, name="cmx-progress")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
        if self._step_log is not None:
            import logging

            logging.getLogger("cmx.step").removeHandler(self._step_log)
        if self.enabled:
            from cmx_core.plugins.loader import get_registry

            manager = get_registry().manager
            if manager.is_registered(self):
                manager.unregister(self)

    @hookimpl
    def cmx_node_started(self, node_id: str, recipe: str, cached: bool) -> None:
        if cached:
            return
        self._started[node_id] = time.perf_counter()
        self._show_step_log()
        if sys.stderr.isatty():
            if self._status is None:
                from rich.console import Console

                self._status = Console(stderr=True).status(f"running {node_id}")
                self._status.start()
            else:
                self._status.update(f"running {node_id}")
        else:
            print(f"cmx: running {node_id} ({recipe})", file=sys.stderr, flush=True)

    @hookimpl
    def cmx_node_finished(self, node_id: str, recipe: str, outputs: Mapping[str, Any],
                          wall_s: float, cached: bool) -> None:
        if cached and not self.verbose:
            return
        how = "cached" if cached else f"{wall_s:.2f} s"
        print(f"cmx: done {node_id} ({how})", file=sys.stderr, flush=True)

    def _show_step_log(self) -> None:
        """Steps' ``ctx.log.info`` lines (a LoadGen test's expected duration, an image built or
        cached) go to stderr as ``cmx: ...`` while progress is shown; set up when the first node
        runs, so a fully cached run never imports :mod:`logging`."""
        if self._step_log is not None:
            return
        import logging

        class _StderrLines(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:  # the current stderr: rich may proxy it
                print(f"cmx: {self.format(record)}", file=sys.stderr, flush=True)

        level = logging.DEBUG if self.verbose else logging.INFO  # -v: steps' debug lines too
        self._step_log = _StderrLines(level)
        logger = logging.getLogger("cmx.step")
        logger.addHandler(self._step_log)
        if logger.level == logging.NOTSET or logger.level > level:
            logger.setLevel(level)
