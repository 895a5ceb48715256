"""The memory cgroup of one process a step starts: the step's own evidence of an OOM kill.

An OOM kill is typed from the step's own group only (docs/faults.md): the kernel counts a kill
in the victim's group, in ``oom_kill`` of ``memory.oom_control`` (cgroup v1, that group alone)
or of ``memory.events`` (cgroup v2, the group and every group below it). A machine-wide
counter (``/proc/vmstat``) also counts kills of processes that are none of the step's, so
it is never read.

:func:`open_group` makes the group (no limit: it only counts) under cmx's own memory group,
where this user may (root on a v1 or hybrid host; root or a delegated subtree on v2); the
process writes itself into it before it execs the step's command (:meth:`StepGroup.join`),
so that everything it starts is born in it. A process that moves itself to another group
takes its evidence with it (a group it makes below its own still counts). The ``oom``
fault injection limits this same group (:func:`group_of`). :meth:`StepGroup.close` reads
the count and removes the group; processes the step left running are moved back to the
parent group first, so that they run on and the group can go. A cmx killed by SIGKILL cannot
remove its group: the next cmx that makes one removes such empty groups of dead makers.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

from cmx_core.sandbox.cgroup2 import V2Groups
from cmx_core.sandbox.cgroups import RunGroups, remove_group_dir

Groups = RunGroups | V2Groups

SHELL = "/bin/sh"
JOIN = '{ echo $$ > "$0"; } 2>/dev/null; exec "$@"'
"""The join: ``$0`` is the group's ``cgroup.procs``, ``"$@"`` the command, never parsed by the shell."""

_BY_PID: dict[int, StepGroup] = {}
_LOCK = threading.Lock()
_SWEPT: set[Path] = set()
_NAME = re.compile(r"cmx-sandbox-(\d+)-\d+")


@dataclass(frozen=True)
class OomCount:
    """What a step's group counted: the OOM kills while it ran, in which group."""

    kills: int
    group: Path


@dataclass
class StepGroup:
    """One process's memory group, and the OOM-kill count it had when the process joined.
    ``limited``: a memory limit was set on it; what is left in it at the end is killed."""

    groups: Groups
    path: Path
    before: int
    pid: int = 0
    limited: bool = False

    def join(self) -> list[str]:
        """What goes first in the process's argv: it writes itself into the group, then execs
        the rest (before it starts anything, so all it starts is born in the group; where the
        write fails, the command runs on where it is and the group counts nothing)."""
        return [SHELL, "-c", JOIN, str(self.path / "cgroup.procs")]

    def started(self, pid: int) -> None:
        """The process runs: :func:`group_of` finds its group."""
        self.pid = pid
        with _LOCK:
            _BY_PID[pid] = self

    def set_memory(self, limit: int) -> bool:
        """Limit the group's memory (the ``oom`` fault injection)."""
        self.limited = self.groups.set_memory(limit)
        return self.limited

    def close(self) -> OomCount:
        """The kills since the process joined; then the group is removed."""
        count = OomCount(max(0, _kills(self.groups, self.path) - self.before), self.path)
        with _LOCK:
            _BY_PID.pop(self.pid, None)
        if self.limited:  # the injection's victims do not run on unbounded
            self.groups.kill_all()
        _release(self.path)
        self.groups.remove()  # gone already: this only forgets it
        return count


def open_group() -> StepGroup | None:
    """A memory group of its own for the next process a step starts (it joins with
    :meth:`StepGroup.join`); ``None`` where none can be made here."""
    if not Path(SHELL).is_file():
        return None
    groups = _make()
    path = _path(groups)
    if path is None:
        return None
    _sweep_once(path.parent)
    return StepGroup(groups, path, _kills(groups, path))


def group_of(pid: int) -> StepGroup | None:
    """The step group that process ``pid`` was put in (None: none)."""
    with _LOCK:
        return _BY_PID.get(pid)


def _make() -> Groups:
    """v1 where the memory controller is mounted and ours, else a v2 group with it."""
    v1 = RunGroups.create(("memory",))
    if v1.dirs:
        return v1
    return V2Groups.create(("memory",))


def _path(groups: Groups) -> Path | None:
    if isinstance(groups, RunGroups):
        return groups.dirs.get("memory")
    if groups.dir is not None and "memory" not in groups.controllers:  # it could not count an OOM kill
        groups.remove()
        return None
    return groups.dir


def _kills(groups: Groups, path: Path) -> int:
    """The kills counted in the group and every group below it (v1 counts each group alone)."""
    if isinstance(groups, V2Groups):
        return groups.oom_kills()
    return sum(_v1_kills(control) for control in sorted(path.rglob("memory.oom_control")))


def _v1_kills(control: Path) -> int:
    try:
        lines = control.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0


def _sweep_once(parent: Path) -> None:
    """Remove the empty groups that cmx processes killed by SIGKILL left under ``parent``
    (they could not remove their own): once per process and parent, only groups whose
    maker (the PID in the name) is gone."""
    with _LOCK:
        if parent in _SWEPT:
            return
        _SWEPT.add(parent)
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        found = _NAME.fullmatch(entry.name)
        if found is None or psutil.pid_exists(int(found.group(1))):
            continue
        try:
            empty = not (entry / "cgroup.procs").read_text().split()
        except OSError:
            continue
        if empty:
            try:
                entry.rmdir()
            except OSError:  # a group below it, or busy: left for later
                pass


def _release(path: Path) -> None:
    """Move what is left in the group (and below) to the parent, then remove them, deepest first."""
    for group in sorted((p.parent for p in path.rglob("cgroup.procs")), key=lambda p: len(p.parts), reverse=True):
        try:
            pids = (group / "cgroup.procs").read_text().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                with open(path.parent / "cgroup.procs", "w") as handle:
                    handle.write(pid)
            except OSError:  # exited meanwhile
                pass
        remove_group_dir(group)
