"""One recorder of everything a run's outcome depended on, fed by the code that read it.

While a run that may leave a warm-run memo is recorded (:func:`recording`), each stage
reports what it reads as it reads it: the catalog its recipe directories and files, the
cache each entry's metadata and recorded paths, the planner the ``path`` inputs and the
variables steps let through, the fact store each fact's fingerprint function or value and
its cache file, the executor each step validator it consulted. The memo (:mod:`cmx_core.run.replay_record`) is this
log, so a new kind of dependency is recorded where it is read or the run is not
replayable: nothing has to remember to list it afterwards. Anything that cannot be checked
again by name (a closure as a fingerprint, a facts file, a failing detector) is reported
with :func:`refuse`, and the run gets no memo.

When nothing records, every function here is a single ``None`` check: the stages call them
unconditionally.

Import-light (standard library only, nothing at module level): the plugin loader and the
catalog import it on every command.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class ReadLog:
    """What one run read, first state wins (a later change is caught when the memo is
    written: see :meth:`changed_since`)."""

    def __init__(self) -> None:
        self.files: dict[str, list[Any]] = {}
        self.links: dict[str, str] = {}
        self.env: dict[str, str | None] = {}
        self.facts: dict[str, dict[str, Any]] = {}
        self.validators: dict[tuple[str, str], dict[str, Any]] = {}
        self.deadlines: list[float] = []
        self.refused: list[str] = []

    def changed_since(self) -> str | None:
        """A file or variable that changed while the run went on, or None."""
        for path, state in self.files.items():
            if file_state(path) != state:
                return f"{path} changed while the run went on"
        for name, value in self.env.items():
            if os.environ.get(name) != value:
                return f"${name} changed while the run went on"
        return None


_ACTIVE: list[ReadLog] = []


def recording() -> _Recording:
    """``with recording() as log:`` records every read into ``log`` until the block ends."""
    return _Recording()


class _Recording:
    def __enter__(self) -> ReadLog:
        log = ReadLog()
        _ACTIVE.append(log)
        return log

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.pop()


def active() -> ReadLog | None:
    return _ACTIVE[-1] if _ACTIVE else None


def file_state(path: str) -> list[Any]:
    """``[path, size, mtime_ns, ctime_ns]``, or ``[path, None, None, None]`` when it does not
    exist. The ctime is the kernel's: an edit in place that puts the size and mtime back
    (``os.utime``) still changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return [path, None, None, None]
    return [path, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


# -- what the stages report ----------------------------------------------------------------


def file(path: str | os.PathLike[str]) -> None:
    """The outcome depends on ``path`` (present or absent) staying as it is now."""
    log = active()
    if log is not None:
        text = os.fspath(path)
        if text not in log.files:
            log.files[text] = file_state(text)


def tree(top: str | os.PathLike[str], suffixes: tuple[str, ...]) -> None:
    """The outcome depends on the directory ``top``: every directory below it and every
    file ending in ``suffixes`` (an added, removed or changed file changes what resolves),
    and on where ``top`` really is (a re-pointed symlink)."""
    log = active()
    if log is None:
        return
    top = os.fspath(top)
    link(top)
    file(top)
    visited: set[tuple[int, int]] = set()
    real_top = os.path.realpath(top).rstrip(os.sep) + os.sep
    for root, dirs, files in os.walk(top, followlinks=True):
        st = os.stat(root)
        if (st.st_dev, st.st_ino) in visited:
            dirs[:] = []
            continue
        visited.add((st.st_dev, st.st_ino))
        # as the catalog scans: never follow a symlink out of ``top`` (a link to / is not walked)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (
            not os.path.islink(os.path.join(root, d))
            or (os.path.realpath(os.path.join(root, d)) + os.sep).startswith(real_top)))
        for name in dirs:
            file(os.path.join(root, name))
        for name in sorted(files):
            if name.endswith(suffixes) and not name.startswith("."):
                file(os.path.join(root, name))


def link(configured: str) -> None:
    """The outcome depends on ``configured`` resolving to where it resolves now."""
    log = active()
    if log is not None and configured not in log.links:
        log.links[configured] = os.path.realpath(os.path.expanduser(configured))


def env(name: str) -> None:
    """The outcome depends on the variable ``name`` (set or not) keeping its value."""
    log = active()
    if log is not None and name not in log.env:
        log.env[name] = os.environ.get(name)


def fact(name: str, check: dict[str, Any]) -> None:
    """How to check again that fact ``name`` still has the value the run used: a
    fingerprint function's reference and result, or a detect function's reference and the
    digest of its value (see :mod:`cmx_core.run.replay`)."""
    log = active()
    if log is not None:
        log.facts.setdefault(name, {"name": name, **check})


def validator(step: str, ref: list[Any], meta: str) -> None:
    """A step type's cache validator accepted the entry whose metadata is ``meta``."""
    log = active()
    if log is not None:
        log.validators.setdefault((step, meta), {"step": step, "ref": ref, "meta": meta})


def deadline(at: float) -> None:
    """The outcome holds only until ``at`` (an entry or a fact expires then)."""
    log = active()
    if log is not None:
        log.deadlines.append(at)


def refuse(reason: str) -> None:
    """Something the outcome depends on cannot be checked again by a later process."""
    log = active()
    if log is not None:
        log.refused.append(reason)


