"""cgroup v1 groups for one sandboxed run: memory, process count, CPU time and CPU set.

Each controller's group is made under this process's own group of that controller (so a
limit set on cmx itself still holds), named after this process and a counter. Any
controller that is missing or not writable (not root, a cgroup v2 host) is simply not
used; the caller falls back to rlimits and says so in the result's ``enforced``.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
_COUNTER = itertools.count()


def group_name() -> str:
    """A new step group's name, ``cmx-sandbox-PID-START-N``. START, the process's start time in
    clock ticks since boot, tells it from an earlier process that had the same PID: PIDs wrap
    (at 32768 on many machines), and a sweep that went by the PID alone took a live process's
    new group for a dead one's leftover and removed it under the step."""
    pid = os.getpid()
    return f"cmx-sandbox-{pid}-{start_ticks(pid) or 0}-{next(_COUNTER)}"


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22);
    None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _own_paths() -> dict[str, str]:
    """Controller name -> this process's group path, from ``/proc/self/cgroup``."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            if name:
                found[name] = path
    return found


def own_group_dir(controller: str) -> Path | None:
    """This process's own group of a v1 ``controller`` (where cmx makes its groups), or None."""
    own = _own_paths().get(controller)
    if own is None:
        return None
    path = ROOT / controller / own.lstrip("/")
    return path if (path / "cgroup.procs").exists() else None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class RunGroups:
    """The groups of one run, by controller; empty when none could be made."""

    kind = "cgroup"
    """How a result names a limit these groups enforce (``memory=cgroup``: cgroup v1)."""

    dirs: dict[str, Path] = field(default_factory=dict)
    memory_files: tuple[Path, ...] | None = None
    """The memory group's limit files (the swap one where the kernel has it), once known."""

    @classmethod
    def create(cls, wanted: tuple[str, ...]) -> RunGroups:
        groups = cls()
        if os.geteuid() != 0:
            return groups
        own = _own_paths()
        name = group_name()
        for controller in wanted:
            base = ROOT / controller
            if controller not in own or not (base / "cgroup.procs").exists():
                continue
            target = base / own[controller].lstrip("/") / name
            try:
                target.mkdir()
            except OSError:
                continue
            groups.dirs[controller] = target
        return groups

    def has(self, controller: str) -> bool:
        return controller in self.dirs

    def set_memory(self, limit: int) -> bool:
        group = self.dirs.get("memory")
        if group is None:
            return False
        try:
            _write(group / "memory.limit_in_bytes", str(limit))
            swap = group / "memory.memsw.limit_in_bytes"
            if swap.exists():  # no swapping past the limit either
                _write(swap, str(limit))
        except OSError:
            self._drop("memory")
            return False
        return True

    def resize_memory(self, limit: int) -> bool:
        """Set a new memory limit on a group in use (the swap bound may never be below it, so
        the order of the two writes depends on the direction)."""
        group = self.dirs.get("memory")
        if group is None:
            return False
        if self.memory_files is None:  # looked up once: a session resizes before every run
            swap = group / "memory.memsw.limit_in_bytes"
            self.memory_files = (group / "memory.limit_in_bytes", *((swap,) if swap.exists() else ()))
        files = self.memory_files
        current = _read_int(files[0]) or 0
        try:
            for path in (files if limit <= current else files[::-1]):
                _write(path, str(limit))
        except OSError:
            return False
        return True

    def memory_usage(self) -> int | None:
        group = self.dirs.get("memory")
        return _read_int(group / "memory.usage_in_bytes") if group else None

    def reset_counters(self) -> None:
        """Start a new measurement: the peak back to the current charge, the CPU time to 0."""
        for controller, name in (("memory", "memory.max_usage_in_bytes"), ("cpuacct", "cpuacct.usage")):
            group = self.dirs.get(controller)
            if group is not None:
                _write(group / name, "0")

    def set_processes(self, limit: int) -> bool:
        group = self.dirs.get("pids")
        if group is None:
            return False
        try:
            _write(group / "pids.max", str(limit))
        except OSError:
            self._drop("pids")
            return False
        return True

    def set_cpus(self, cpus: list[int]) -> bool:
        group = self.dirs.get("cpuset")
        if group is None:
            return False
        try:
            _write(group / "cpuset.cpus", ",".join(map(str, cpus)))
            _write(group / "cpuset.mems", (group.parent / "cpuset.mems").read_text().strip())
        except OSError:
            self._drop("cpuset")
            return False
        return True

    def add(self, pid: int) -> list[str]:
        """Move ``pid`` into every group; the controllers that refused it are dropped and named."""
        refused = []
        for controller, group in list(self.dirs.items()):
            try:
                _write(group / "cgroup.procs", str(pid))
            except OSError:
                refused.append(controller)
                self._drop(controller)
        return refused

    def peak_memory(self) -> int | None:
        group = self.dirs.get("memory")
        return _read_int(group / "memory.max_usage_in_bytes") if group else None

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit (``oom_kill`` in
        ``memory.oom_control``; older kernels lack it, then a failed charge counts)."""
        group = self.dirs.get("memory")
        if group is None:
            return 0
        try:
            fields = dict(line.split() for line in (group / "memory.oom_control").read_text().splitlines())
        except (OSError, ValueError):
            return 0
        if "oom_kill" in fields:
            return int(fields["oom_kill"])
        return 1 if (_read_int(group / "memory.failcnt") or 0) and fields.get("under_oom") == "1" else 0

    def cpu_seconds(self) -> float | None:
        group = self.dirs.get("cpuacct")
        usage = _read_int(group / "cpuacct.usage") if group else None
        return usage / 1e9 if usage is not None else None

    def pids(self) -> list[int]:
        for controller in ("pids", "memory", "cpuacct", "cpuset"):
            group = self.dirs.get(controller)
            if group is not None:
                try:
                    return [int(p) for p in (group / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    continue
        return []

    def forks_refused(self) -> int:
        """How many forks ``pids.max`` refused (``max`` in ``pids.events``): a run that caught
        its EAGAIN still hit the process limit."""
        group = self.dirs.get("pids")
        if group is None:
            return 0
        try:
            lines = (group / "pids.events").read_text().splitlines()
        except OSError:
            return 0
        return next((int(line.split()[1]) for line in lines if line.startswith("max ")), 0)

    def kill_all(self, timeout_s: float = 5.0, spare: frozenset[int] = frozenset()) -> list[int]:
        """SIGKILL whatever is still in the groups (but ``spare``) until they are empty; the PIDs that were."""
        seen: list[int] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            left = [pid for pid in self.pids() if pid not in spare]
            if not left:
                break
            for pid in left:
                seen.append(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        return seen

    def remove(self) -> None:
        for controller in list(self.dirs):
            self._drop(controller)

    def _drop(self, controller: str) -> None:
        group = self.dirs.pop(controller, None)
        if group is not None:
            remove_group_dir(group)


REMOVE_RETRIES = 500
"""How many times (10 ms apart, 5 s in all) a busy group's removal is tried: on a loaded
machine a killed process can take longer than a moment to leave its group."""


def remove_group_dir(group: Path) -> None:
    """Remove a cgroup directory (v1 or v2), retrying while the kernel still calls it busy:
    a group is busy for a moment after its last process exits. Gone already is fine."""
    for _ in range(REMOVE_RETRIES):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
