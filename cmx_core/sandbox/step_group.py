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
fault injection limits this same group (:func:`group_of`).

The group is also what contains the step: :meth:`StepGroup.close` reads the count, then
kills every process still in the group or below it (a ``setsid env -i`` grandchild left the
process group and the environment token, never the cgroup) and removes the group, so
nothing a step started outlives the step. A cmx killed by SIGKILL cannot: its watchdog
kills the groups it was told of (:mod:`cmx_core.run.watchdog`), and the next cmx start
kills what is left in the groups of dead makers and removes them (:func:`sweep_left_groups`).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from cmx_core.sandbox.cgroup2 import V2Groups, parent_group
from cmx_core.sandbox.cgroups import RunGroups, own_group_dir, remove_group_dir, start_ticks

Groups = RunGroups | V2Groups

SHELL = "/bin/sh"
JOIN = '{ echo $$ > "$0"; } 2>/dev/null; exec "$@"'
"""The join: ``$0`` is the group's ``cgroup.procs``, ``"$@"`` the command, never parsed by the shell."""

_BY_PID: dict[int, StepGroup] = {}
_LOCK = threading.Lock()
_SWEPT: set[Path] = set()
_NAME = re.compile(r"cmx-sandbox-(\d+)(?:-(\d+))?-\d+")
"""A step group's name: its maker's PID, the maker's start time (a group an older cmx made has
none) and a count (:func:`~cmx_core.sandbox.cgroups.group_name`)."""
KILL_BOUND_S = 5.0
"""How long a group's processes are killed for until it is empty (a process in uninterruptible
sleep dies when it wakes; its group is then removed by a later sweep)."""


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
        kill_group_tree(self.path)  # what the step left running dies with the step
        _remove_tree(self.path)
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


def _sweep_once(parent: Path) -> list[int]:
    """Once per process and parent: :func:`sweep_dead` ``parent``; the PIDs it killed."""
    with _LOCK:
        if parent in _SWEPT:
            return []
        _SWEPT.add(parent)
    return sweep_dead(parent)


def sweep_left_groups() -> list[int]:
    """At a cmx start: kill what is left in the step groups of cmx processes that are gone
    (killed by SIGKILL with their watchdog) and remove the groups; the PIDs it killed."""
    parents = {p for p in (own_group_dir("memory"), _v2_parent()) if p is not None}
    return [pid for parent in parents for pid in _sweep_once(parent)]


def _v2_parent() -> Path | None:
    try:
        return parent_group()
    except Exception:  # noqa: BLE001 - a bad CMX_SANDBOX_CGROUP is reported where a group is made
        return None


def sweep_dead(parent: Path) -> list[int]:
    """Kill the processes in the step groups under ``parent`` whose maker (the PID in the
    name) is gone, and remove those groups; the PIDs it killed. A group holding a process of
    another PID namespace is left alone: its maker's PID was a PID of that namespace (a cmx
    in a container), and says nothing about this one's."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    killed: list[int] = []
    for entry in entries:
        found = _NAME.fullmatch(entry.name)
        if found is None or not entry.is_dir() or _maker_alive(int(found.group(1)), found.group(2)):
            continue
        if not all(_same_pid_namespace(pid) for pid in _pids_below(entry)):
            continue
        killed += kill_group_tree(entry, bound_s=1.0)
        _remove_tree(entry)
    return killed


def _maker_alive(pid: int, start: str | None) -> bool:
    """Whether the process that made a group still runs: its PID, started when the name says
    (a later process with the same PID is another; an older cmx's name has no start time)."""
    if start is not None and (ticks := start_ticks(pid)) is not None:
        return ticks == int(start)
    return bool(psutil.pid_exists(pid))  # an older cmx's name, or /proc/PID unreadable (hidepid): the PID alone


def _same_pid_namespace(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
    except OSError:
        return True  # gone meanwhile


def kill_group_tree(path: Path, bound_s: float = KILL_BOUND_S) -> list[int]:
    """SIGKILL every process in the group and the groups below it until all are empty (for
    at most ``bound_s``); the PIDs it killed. Never this process."""
    killed: list[int] = []
    me = os.getpid()
    deadline = time.monotonic() + bound_s
    while True:
        left = [pid for pid in _pids_below(path) if pid != me]
        if not left or time.monotonic() > deadline:
            return killed
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _pids_below(path: Path) -> list[int]:
    pids: list[int] = []
    for procs in path.rglob("cgroup.procs"):
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def _remove_tree(path: Path) -> None:
    """Remove the group and the groups below it, deepest first (each must be empty)."""
    for group in sorted((p.parent for p in path.rglob("cgroup.procs")), key=lambda p: len(p.parts), reverse=True):
        remove_group_dir(group)
