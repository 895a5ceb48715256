"""What one sampling round reads through ``psutil``: the run's process tree and the machine.

A probe's :meth:`read` returns :data:`Point` values (family, extra labels, value). A quantity
this machine does not give (``/proc/<pid>/io`` in some containers, no disk counters) is left
out and named once in :attr:`problems`, never reported as zero.

The process tree is cmx's own process and all its descendants (the steps' children, their
children...). Counters (CPU seconds, bytes read and written) are kept monotonic as processes
come and go: a process that ended keeps adding what it had when it was last seen, so the
tree's total can miss at most the last interval of a short-lived child.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import psutil

from cmx_core.telemetry.reading import one_line

Labels = tuple[tuple[str, str], ...]
Point = tuple[str, Labels, float]


class ProcessTree:
    """The process ``root_pid`` and its descendants."""

    def __init__(self, root_pid: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._psutil: Any = psutil
        self._root = psutil.Process(root_pid or os.getpid())
        self._known: dict[int, Any] = {self._root.pid: self._root}
        self._last: dict[int, tuple[float, float, float]] = {}
        self._gone = [0.0, 0.0, 0.0]
        self._counted = [0.0, 0.0, 0.0]
        """The counters last reported: a sum taken in another order can come out a rounding error
        lower (2.4599999999999995 after 2.46), and a counter that goes down reads as a reset."""
        self._clock = clock
        self._previous: tuple[float, float] | None = None
        self._peak = 0.0
        self._io = True
        self.problems: list[str] = []
        self._by_children = os.path.exists(f"/proc/{self._root.pid}/task/{self._root.pid}/children")
        if not self._by_children:
            self.problems.append("process tree: this kernel has no /proc/<pid>/task/<tid>/children; "
                                 "every process on the machine is read each round to find the run's")

    def _members(self) -> list[Any]:
        """The tree now: the known processes still running and their new children, found
        through ``/proc/<pid>/task/<tid>/children`` (the kernel's list of each thread's
        children), so a round costs in proportion to the run's processes, not the machine's."""
        if not self._by_children:
            return self._scan()
        members: list[Any] = []
        queue = [self._root, *(p for pid, p in self._known.items() if pid != self._root.pid)]
        listed = {proc.pid for proc in queue}
        while queue:
            proc = queue.pop()
            if proc is not self._root and not proc.is_running():  # ended, or its pid reused
                self._known.pop(proc.pid, None)
                continue
            members.append(proc)
            for pid in self._children_of(proc.pid):
                if pid in listed:
                    continue
                listed.add(pid)
                try:
                    child = self._known.setdefault(pid, self._psutil.Process(pid))
                except self._psutil.Error:
                    continue
                queue.append(child)
        return members

    def _children_of(self, pid: int) -> list[int]:
        found: list[int] = []
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return found
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as handle:
                    found += [int(word) for word in handle.read().split()]
            except OSError:
                continue  # the thread ended meanwhile
        return found

    def _scan(self) -> list[Any]:
        """Where the kernel has no ``children`` files: every process's parent, psutil's way."""
        try:
            children = self._root.children(recursive=True)
        except self._psutil.Error:
            children = []
        members = [self._root]
        for child in children:  # keep one Process object per pid (its create time guards reuse)
            members.append(self._known.setdefault(child.pid, child))
        return members

    def read(self) -> list[Point]:
        rss = threads = 0.0
        seen: dict[int, tuple[float, float, float]] = {}
        for proc in self._members():
            try:
                with proc.oneshot():
                    cpu = proc.cpu_times()
                    memory = proc.memory_info()
                    count = proc.num_threads()
                    io = self._io_of(proc)
            except (self._psutil.NoSuchProcess, self._psutil.ZombieProcess):
                continue
            seen[proc.pid] = (cpu.user + cpu.system, *io)
            rss += memory.rss
            threads += count
        for pid in set(self._last) - set(seen):  # ended since the last round
            for i, value in enumerate(self._last.pop(pid)):
                self._gone[i] += value
            self._known.pop(pid, None)
        self._last.update(seen)
        totals = [max(self._counted[i], self._gone[i] + sum(v[i] for v in seen.values())) for i in range(3)]
        self._counted = totals
        self._peak = max(self._peak, rss)
        points: list[Point] = [
            ("cmx_process_cpu_seconds", (), totals[0]),
            ("cmx_process_resident_memory_bytes", (), rss),
            ("cmx_process_resident_memory_peak_bytes", (), self._peak),
            ("cmx_process_threads", (), threads),
            ("cmx_process_processes", (), float(len(seen))),
        ]
        now = self._clock()
        if self._previous is not None and now > self._previous[0]:
            points.append(("cmx_process_cpu_cores", (),
                           max(0.0, (totals[0] - self._previous[1]) / (now - self._previous[0]))))
        self._previous = (now, totals[0])
        if self._io:
            points += [("cmx_process_read_bytes", (), totals[1]), ("cmx_process_written_bytes", (), totals[2])]
        return points

    def _io_of(self, proc: Any) -> tuple[float, float]:
        if not self._io:
            return 0.0, 0.0
        try:
            io = proc.io_counters()
        except (self._psutil.AccessDenied, AttributeError, OSError) as err:
            if isinstance(err, self._psutil.NoSuchProcess):
                raise
            self._io = False
            self.problems.append(f"process read/write bytes: {one_line(err)}")
            return 0.0, 0.0
        return float(io.read_bytes), float(io.write_bytes)


class Machine:
    """The whole machine: CPU per logical core, memory, disk and network counters."""

    def __init__(self) -> None:
        self._psutil: Any = psutil
        psutil.cpu_percent(percpu=True)  # the first call only starts the interval
        self._primed = False
        self._disk = True
        self._net = True
        self.problems: list[str] = []

    def read(self) -> list[Point]:
        psutil = self._psutil
        points: list[Point] = []
        per_cpu = psutil.cpu_percent(percpu=True)
        if self._primed:
            points += [("cmx_node_cpu_utilization_ratio", (("cpu", str(i)),), pct / 100.0)
                       for i, pct in enumerate(per_cpu)]
        self._primed = True
        memory = psutil.virtual_memory()
        points += [("cmx_node_memory_total_bytes", (), float(memory.total)),
                   ("cmx_node_memory_available_bytes", (), float(memory.available))]
        if self._disk:
            disk = self._counters(psutil.disk_io_counters, "disk read/written bytes")
            if disk is None:
                self._disk = False
            else:
                points += [("cmx_node_disk_read_bytes", (), float(disk.read_bytes)),
                           ("cmx_node_disk_written_bytes", (), float(disk.write_bytes))]
        if self._net:
            net = self._counters(psutil.net_io_counters, "network bytes")
            if net is None:
                self._net = False
            else:
                points += [("cmx_node_network_receive_bytes", (), float(net.bytes_recv)),
                           ("cmx_node_network_transmit_bytes", (), float(net.bytes_sent))]
        return points

    def _counters(self, read: Callable[[], Any], what: str) -> Any:
        try:
            value = read()
        except (OSError, RuntimeError) as err:
            self.problems.append(f"{what}: {one_line(err)}")
            return None
        if value is None:
            self.problems.append(f"{what}: psutil finds no counters on this machine")
        return value
