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
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from cmx_core.sandbox.cgroups import remove_group_dir

MOUNTINFO = Path("/proc/self/mountinfo")
OWN = Path("/proc/self/cgroup")
_COUNTER = itertools.count()

CONTROLLER_OF = {"memory": "memory", "pids": "pids", "cpuset": "cpuset", "cpuacct": "cpu"}
"""The v1 names callers ask for -> the v2 controller behind them (``cpuacct``'s CPU time is
``cpu.stat``, which every v2 group has; only ``cpu.max`` needs the ``cpu`` controller)."""

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

    @classmethod
    def create(cls, wanted: tuple[str, ...], parent: Path | None = None) -> V2Groups:
        """A group under ``parent`` (default: this process's own v2 group on the first cgroup2
        mount) with the controllers of ``wanted`` the parent can give; empty where the parent
        is missing or not writable by this user."""
        if parent is None:
            mounts, own = unified_mounts(), own_path()
            if not mounts or own is None:
                return cls()
            parent = mounts[0] / own.lstrip("/")
        offered = set((_read(parent / "cgroup.controllers") or "").split())
        need = {CONTROLLER_OF[name] for name in wanted if name in CONTROLLER_OF} & offered
        enabled = set((_read(parent / "cgroup.subtree_control") or "").split())
        for controller in sorted(need - enabled):
            try:
                _write(parent / "cgroup.subtree_control", f"+{controller}")
            except OSError:  # busy parent (processes in it) or not delegated: do without
                need.discard(controller)
        target = parent / f"cmx-sandbox-{os.getpid()}-{next(_COUNTER)}"
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
        if self.dir is None or controller not in self.controllers:
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
        if self.dir is None:
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
        if group is not None:
            remove_group_dir(group)
