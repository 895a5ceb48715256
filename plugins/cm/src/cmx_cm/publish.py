"""An import's recipes written aside and moved into the recipe directory at the end, so that
an import stopped part way leaves the directory as the last whole import left it: a later
``cmx run --recipes DIR`` or ``cmx cm run script`` never picks among a part of the scripts.

The files are first written to ``DIR/.importing-PID`` (a dot folder, which no recipe scan
reads), then each is renamed into ``DIR`` with SIGINT, SIGTERM and SIGHUP held back until the last:
a Ctrl-C or ``kill PID`` of cmx during an import leaves ``DIR`` as it was (or, during the
renames, as the whole new import) and removes the folder. Only ``kill -9`` within those few
renames can part them; the folder it leaves is removed by the next import into ``DIR`` once
its process is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path

PREFIX = ".importing-"
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A fresh folder in ``out_dir`` to write an import into; removed when the block ends."""
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_stale(out_dir)
    staging = out_dir / f"{PREFIX}{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(staging: Path, out_dir: Path, last: Iterable[str], remove: Iterable[str]) -> None:
    """Move every file of ``staging`` into ``out_dir`` (the names in ``last`` after the rest)
    and delete ``remove`` there, a stopping signal that comes meanwhile acted on once it is done."""
    ending = [name for name in last if (staging / name).is_file()]
    names = sorted(p.name for p in staging.iterdir() if p.is_file() and p.name not in ending) + ending
    with _signals_held():
        for name in names:
            os.replace(staging / name, out_dir / name)
        for name in remove:
            (out_dir / name).unlink(missing_ok=True)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP recorded instead of handled during the block, then sent
    again to this process (its own handlers act then). Handlers can only be set from the
    main thread: elsewhere the block runs as it is."""
    caught: list[int] = []
    try:
        previous = {number: signal.signal(number, lambda got, _frame: caught.append(got)) for number in HELD}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if caught:
            signal.raise_signal(caught[0])


def clear_stale(out_dir: Path) -> None:
    """Remove what an import killed with ``kill -9`` left: the folders of processes that are gone."""
    for folder in out_dir.glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX):]
        if folder.is_dir() and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
