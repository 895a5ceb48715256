"""Where ``cmx results export`` writes, safely, and which runs it exports.

``-`` is stdout. A symlink is written through to its target (the link stays); a FIFO, a
character or block device is opened and written to, never replaced by a regular file (an
atomic rename over ``/dev/stdout`` as root would break the machine for every later
program). Anything else is the exporter's own atomic write.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.plugins.loader import get_registry
from cmx_core.results.export import BUILTIN_FORMATS, export_results

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from cmx_core.results.records import StoredResult
    from cmx_core.results.store import ResultStore

STDOUT = "-"
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def is_stream(dest: str) -> bool:
    """Stdout, or a path (through any symlinks) naming a FIFO or a device."""
    if dest == STDOUT:
        return True
    try:
        mode = os.stat(dest).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def write_export(fmt: str, dest: str, results: Sequence[StoredResult]) -> str:
    """Export ``results`` to ``dest``; returns what was written (``-`` for stdout)."""
    exporters = {} if fmt in BUILTIN_FORMATS else get_registry().exporters
    if not is_stream(dest):
        target = Path(os.path.realpath(dest)) if os.path.islink(dest) else Path(dest)
        return str(export_results(fmt, target, results, exporters))
    with tempfile.TemporaryDirectory(prefix="cmx-export-") as scratch:
        written = export_results(fmt, Path(scratch) / f"results.{fmt}", results, exporters)
        if not written.is_file():
            raise UsageError(f"export format {fmt!r} writes a directory; give a directory as DEST, not {dest}")
        data = written.read_bytes()
    if dest == STDOUT:
        sys.stdout.flush()
        if hasattr(sys.stdout, "buffer"):
            sys.stdout.buffer.write(data)
        else:  # a text-only stdout (an embedder's, pytest's capture)
            sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
        return STDOUT
    with open(dest, "wb") as stream:  # opens the FIFO or device itself: nothing is replaced
        stream.write(data)
    return dest


def since_cutoff(text: str) -> datetime:
    """``7d``/``12h``/``30m``/``2w`` ago, or an ISO date or time (UTC unless it says)."""
    found = _DURATION.match(text.strip())
    now = datetime.now(timezone.utc)
    if found:
        return now - timedelta(seconds=int(found.group(1)) * _SECONDS[found.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r}: give a duration like 7d, 12h or 30m, or a date like 2026-12-01") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def select_runs(store: ResultStore, runs: Sequence[str], *, every: bool, recipe: str | None,
                status: str | None, since: str | None) -> list[StoredResult]:
    """The named runs, or (``--all`` or a filter) every indexed run the filters keep."""
    filtered = every or recipe is not None or status is not None or since is not None
    if runs and filtered:
        raise UsageError("cmx results export: give run ids or --all/--recipe/--status/--since, not both")
    if not runs and not filtered:
        raise UsageError("cmx results export: give run ids, or --all (optionally with --recipe, --status, --since)")
    if runs:
        return [store.get(run) for run in runs]
    cutoff = since_cutoff(since) if since is not None else None
    rows = store.list(limit=2**62, recipe=recipe, status=status)
    if cutoff is not None:
        rows = [r for r in rows if _created(r.created_at) >= cutoff]
    if not rows:
        raise UsageError("cmx results export: no indexed run matches the filters (see 'cmx results list')")
    return [store.get(r.run_id) for r in reversed(rows)]  # oldest first, like a log


def _created(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
