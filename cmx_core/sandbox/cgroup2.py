"""cgroup v2 groups for one sandboxed run: the same interface as ``cgroups.RunGroups`` (v1).

Under the unified hierarchy one directory holds every controller, so a run's group is one
directory, made under this process's own group (``0::/path`` in ``/proc/self/cgroup``) or a
subtree delegated to this user (``systemd-run --user --scope``, or any cgroup the user owns):

==================  ==========================================================================
limit               file
==================  ==========================================================================
memory              ``memory.max``, and ``memory.swap.max`` = 0 (no swapping past the limit)
processes           ``pids.max``
cpus                ``cpuset.cpus`` (the CPUs taken) and ``cpu.max`` (that many CPUs' time)
==================  ==========================================================================

Measured: the peak from ``memory.peak``, OOM kills from ``oom_kill`` in ``memory.events``, CPU
time from ``usage_usec`` in ``cpu.stat``. ``cgroup.kill`` ends every process of the run at once,
``populated 0`` in ``cgroup.events`` says none is left. A controller is used only where the
parent lists it in ``cgroup.controllers`` (enabled for children through
``cgroup.subtree_control``); the rest are reported missing, as with v1, and the caller
falls back (``watchdog.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.sandbox.cgroups import group_name, remove_group_dir

MOUNTINFO = Path("/proc/self/mountinfo")
OWN = Path("/proc/self/cgroup")

CONTROLLER_OF = {"memory": "memory", "pids": "pids", "cpuset": "cpuset", "cpuacct": "cpu"}
"""The v1 names callers ask for -> the v2 controller behind them (``cpuacct``'s CPU time is
``cpu.stat``, which every v2 group has; only ``cpu.max`` needs the ``cpu`` controller)."""

DELEGATED_ENV = "CMX_SANDBOX_CGROUP"
"""A cgroup v2 directory delegated to this user, to make the runs' groups in (default: this
process's own v2 group, where it is root's or delegated to this user)."""

DELEGATION_FILES = ("cgroup.procs", "cgroup.subtree_control")
"""What the kernel's cgroup-v2 documentation has a delegatee own, besides the directory
(``cgroup.threads`` too, which the sandbox does not use)."""

PERIOD_US = 100_000
"""``cpu.max``'s period: a quota of N periods' worth is N CPUs."""


def unified_mounts(mountinfo: Path = MOUNTINFO) -> list[Path]:
    """Every cgroup2 mount point (``/sys/fs/cgroup`` on a v2 host, ``.../unified`` on a hybrid one)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            found.append(Path(left.split()[4]))
    return found


def own_path(cgroup_file: Path = OWN) -> str | None:
    """This process's v2 group (the ``0::`` line), e.g. ``/user.slice/.../run-r1.scope``."""
    try:
        for line in cgroup_file.read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        return None
    return None


def delegated(path: Path) -> bool:
    """Whether this user may make groups under ``path`` and move processes into them: the
    directory and its delegation files writable (owned by the user, as the kernel's
    delegation model has it, or root)."""
    if not (path / "cgroup.procs").is_file():
        return False
    return all(os.access(target, os.W_OK) for target in (path, *(path / name for name in DELEGATION_FILES)))


def parent_group(env: Mapping[str, str] | None = None, mountinfo: Path = MOUNTINFO,
                 cgroup_file: Path = OWN) -> Path | None:
    """Where a run's v2 group is made: ``$CMX_SANDBOX_CGROUP`` (a UsageError unless it is a
    directory delegated to this user), else this process's own group on the first cgroup2
    mount, where this user may write it (root, or a subtree delegated to it, such as a
    ``systemd-run --user --scope -p Delegate=yes`` scope); None where there is none."""
    configured = (os.environ if env is None else env).get(DELEGATED_ENV)
    if configured:
        path = Path(configured)
        if not delegated(path):
            raise UsageError(f"{DELEGATED_ENV}={configured}: not a cgroup v2 directory uid {os.geteuid()} may make "
                             "groups in (it, cgroup.procs and cgroup.subtree_control must be the user's); "
                             "delegate it (chown) or unset the variable")
        return path
    mounts, own = unified_mounts(mountinfo), own_path(cgroup_file)
    if not mounts or own is None:
        return None
    path = mounts[0] / own.lstrip("/")
    return path if delegated(path) else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _keyed(path: Path) -> dict[str, int]:
    """A flat-keyed file (``memory.events``, ``cpu.stat``, ``cgroup.events``) as a dict."""
    found: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            found[key] = int(value)
    return found


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


@dataclass
class V2Groups:
    """One run's group under the unified hierarchy (``dir`` None when none could be made)."""

    kind = "cgroup-v2"
    """How a result names a limit this group enforces (``memory=cgroup-v2``)."""

    dir: Path | None = None
    controllers: set[str] = field(default_factory=set)
    """The v2 controllers enabled in the group (a subset of those its parent offers)."""
    owned: bool = True
    """Made here (limits written, removed after the run); False for a group that another
    made and limited, such as a systemd scope (``adopt``)."""

    @classmethod
    def adopt(cls, pid: int, mountinfo: Path = MOUNTINFO) -> V2Groups:
        """The v2 group ``pid`` is in, to measure and end it but not to limit or remove it
        (a ``systemd-run --user --scope``, whose limits systemd set); empty where unknown."""
        mounts, own = unified_mounts(mountinfo), own_path(Path(f"/proc/{pid}/cgroup"))
        if not mounts or own is None:
            return cls()
        group = mounts[0] / own.lstrip("/")
        if not (group / "cgroup.procs").is_file():
            return cls()
        offered = set((_read(group / "cgroup.controllers") or "").split())
        return cls(group, offered & set(CONTROLLER_OF.values()), owned=False)

    @classmethod
    def create(cls, wanted: tuple[str, ...], parent: Path | None = None) -> V2Groups:
        """A group under ``parent`` (default: this process's own v2 group on the first cgroup2
        mount, or ``$CMX_SANDBOX_CGROUP``: :func:`parent_group`) with the controllers of
        ``wanted`` the parent can give; empty where the parent is missing or not writable by
        this user. A group without any controller still ends the run's processes
        (``cgroup.kill``) and counts its CPU time (``cpu.stat``)."""
        if parent is None:
            parent = parent_group()
            if parent is None:
                return cls()
        offered = set((_read(parent / "cgroup.controllers") or "").split())
        need = {CONTROLLER_OF[name] for name in wanted if name in CONTROLLER_OF} & offered
        enabled = set((_read(parent / "cgroup.subtree_control") or "").split())
        for controller in sorted(need - enabled):
            try:
                _write(parent / "cgroup.subtree_control", f"+{controller}")
            except OSError:  # busy parent (processes in it) or not delegated: do without
                need.discard(controller)
        target = parent / group_name()
        try:
            target.mkdir()
        except OSError:
            return cls()
        return cls(target, need)

    def has(self, controller: str) -> bool:
        if self.dir is None:
            return False
        if controller == "cpuacct":
            return (self.dir / "cpu.stat").exists()
        return CONTROLLER_OF.get(controller, controller) in self.controllers

    def _set(self, controller: str, values: dict[str, str]) -> bool:
        if self.dir is None or controller not in self.controllers or not self.owned:
            return False
        try:
            for name, value in values.items():
                if name == "memory.swap.max" and not (self.dir / name).exists():
                    continue  # no swap accounting in this kernel: nothing to bound
                _write(self.dir / name, value)
        except OSError:
            self.controllers.discard(controller)
            return False
        return True

    def set_memory(self, limit: int) -> bool:
        return self._set("memory", {"memory.max": str(limit), "memory.swap.max": "0"})

    def resize_memory(self, limit: int) -> bool:
        return self._set("memory", {"memory.max": str(limit)})

    def set_processes(self, limit: int) -> bool:
        return self._set("pids", {"pids.max": str(limit)})

    def set_cpus(self, cpus: list[int]) -> bool:
        pinned = self._set("cpuset", {"cpuset.cpus": ",".join(map(str, cpus))})
        self._set("cpu", {"cpu.max": f"{len(cpus) * PERIOD_US} {PERIOD_US}"})
        return pinned

    def add(self, pid: int) -> list[str]:
        """Move ``pid`` into the group; every controller is refused together in v2."""
        if self.dir is None or not self.owned:  # an adopted group holds the process already
            return []
        try:
            _write(self.dir / "cgroup.procs", str(pid))
        except OSError:
            refused = [name for name in CONTROLLER_OF if self.has(name)]
            self.remove()
            return refused
        return []

    def memory_usage(self) -> int | None:
        text = _read(self.dir / "memory.current") if self.dir else None
        return int(text) if text and text.strip().isdigit() else None

    def peak_memory(self) -> int | None:
        text = _read(self.dir / "memory.peak") if self.dir and "memory" in self.controllers else None
        return int(text) if text and text.strip().isdigit() else None

    def oom_kills(self) -> int:
        if self.dir is None or "memory" not in self.controllers:
            return 0
        return _keyed(self.dir / "memory.events").get("oom_kill", 0)

    def forks_refused(self) -> int:
        """How many forks ``pids.max`` refused (``max`` in ``pids.events``)."""
        if self.dir is None or "pids" not in self.controllers:
            return 0
        return _keyed(self.dir / "pids.events").get("max", 0)

    def cpu_seconds(self) -> float | None:
        if self.dir is None:
            return None
        usage = _keyed(self.dir / "cpu.stat").get("usage_usec")
        return usage / 1e6 if usage is not None else None

    def populated(self) -> bool:
        return bool(self.dir and _keyed(self.dir / "cgroup.events").get("populated", 0))

    def pids(self) -> list[int]:
        text = _read(self.dir / "cgroup.procs") if self.dir else None
        return [int(p) for p in (text or "").split()]

    def kill_all(self, timeout_s: float = 5.0, spare: frozenset[int] = frozenset()) -> list[int]:
        """``cgroup.kill``: SIGKILL to every process of the group at once; wait until it is empty."""
        if self.dir is None:
            return []
        seen = [pid for pid in self.pids() if pid not in spare]
        if not seen:
            return []
        if spare & set(self.pids()):  # cgroup.kill would take the spared ones too
            for pid in seen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        else:
            try:
                _write(self.dir / "cgroup.kill", "1")
            except OSError:
                return []
        deadline = time.monotonic() + timeout_s
        while self.populated() and time.monotonic() < deadline:
            time.sleep(0.01)
        return seen

    def remove(self) -> None:
        group, self.dir = self.dir, None
        self.controllers = set()
        if group is not None and self.owned:
            remove_group_dir(group)
