"""The default sandbox backend: bubblewrap namespaces, cgroup v1 limits; without cgroups an RSS
watchdog, rusage and rlimits (``watchdog.py``).

How a run goes: the cgroups are made and limited; ``bwrap`` starts with ``--block-fd``, so
its sandbox process waits, fully set up, before the program starts; the parent learns that
process's PID from ``--json-status-fd``, moves it into the cgroups, lowers its rlimits with
``prlimit(2)`` and pins its CPUs, then lets it go. No ``preexec_fn`` and no wrapper process
per run: the limits are applied from outside, between set-up and start, and everything the
program starts inherits them. The parent enforces the wall-time limit, the output cap and
the CPU-time limit of the whole run, and kills the sandbox's outer process on any of them;
``--die-with-parent`` and the PID namespace then take every process inside down with it,
and the cgroups are emptied and removed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from cmx_core.errors import UsageError
from cmx_core.sandbox.bwrap_args import (
    BwrapFds,
    bwrap_args,
    check_program,
    gpu_devices,
    identity_files,
    options_in_fd,
)
from cmx_core.sandbox.capture import Captured, Child, drain, pump
from cmx_core.sandbox.cgroup2 import V2Groups
from cmx_core.sandbox.cgroups import RunGroups
from cmx_core.sandbox.cpus import pick_cpus
from cmx_core.sandbox.result import SandboxResult
from cmx_core.sandbox.seccomp import program_filter
from cmx_core.sandbox.spec import Limits, SandboxSpec, check_spec
from cmx_core.sandbox.systemd_scope import UserManager, scope_limits, scope_prefix, user_manager
from cmx_core.sandbox.verdict import Ending, decide
from cmx_core.sandbox.watchdog import MemoryWatchdog, Usage, subreaper
from cmx_core.sandbox.workfs import WorkFs, check_fits, mounted_under

START_TIMEOUT_S = 10.0
"""How long bubblewrap may take to build the sandbox before the run is an error."""

WATCH_TICK_S = 0.02
"""How often the RSS watchdog looks at the run's processes (no memory cgroup)."""

SCAN_LIMIT = 10_000
"""Directory entries looked at when searching the work dir for a file at the size bound."""


class BubblewrapSandbox:
    """Runs a spec with ``bwrap`` (see the module docstring); ``available()`` says whether it can."""

    name = "bubblewrap"

    def available(self) -> str | None:
        if not Path("/proc/self/ns/pid").exists():
            return "bubblewrap needs Linux namespaces, which this system does not have"
        if shutil.which("bwrap") is None:
            return "bwrap is not installed; install the bubblewrap package (apt-get install -y bubblewrap)"
        if os.geteuid() == 0:
            if not Path("/usr/bin/setpriv").exists():
                return "/usr/bin/setpriv (util-linux) is missing; it drops root inside the sandbox"
            return None
        return _userns_problem()

    def run(self, spec: SandboxSpec) -> SandboxResult:
        check_spec(spec)
        check_program(spec)
        gpu_devices(spec.gpus)  # no GPU here for a spec that asks for one: a usage error before anything starts
        problem = self.available()
        if problem:
            raise UsageError(f"sandbox backend 'bubblewrap' cannot run here: {problem}")
        as_root = os.geteuid() == 0
        if as_root:
            _hand_over(Path(spec.work_dir), spec.user.uid, spec.user.gid)
        if spec.limits.work_bytes is not None:
            check_fits(Path(spec.work_dir), spec.limits.work_bytes)
        groups = make_groups(_controllers(spec.limits))
        manager = None if as_root or _has_group(groups) else user_manager()
        try:
            cpus = pick_cpus(spec.limits.cpus) if spec.limits.cpus is not None else None
            enforced = _limit_groups(groups, spec.limits, cpus)
            return _Run(spec, as_root, groups, enforced, cpus, manager).go()
        finally:
            groups.kill_all()
            groups.remove()


USERNS_KNOBS = {"/proc/sys/user/max_user_namespaces": ("0", "sysctl -w user.max_user_namespaces=15000"),
                "/proc/sys/kernel/unprivileged_userns_clone": ("0", "sysctl -w kernel.unprivileged_userns_clone=1"),
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns":
                    ("1", "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give bwrap an AppArmor "
                          "profile that allows userns")}
"""Kernel settings that stop a non-root bwrap: path -> (the value that stops it, what to set)."""


@functools.lru_cache(maxsize=1)
def _userns_problem() -> str | None:
    """Why a non-root bwrap cannot make its user namespace here, else None: a knob set against
    it, or (checked once per process) a trial ``bwrap --unshare-user`` that fails."""
    for knob, (bad, fix) in USERNS_KNOBS.items():
        try:
            if Path(knob).read_text().strip() == bad:
                return f"unprivileged user namespaces are restricted ({knob} is {bad}); run as root or {fix}"
        except OSError:
            continue
    trial = [shutil.which("bwrap") or "bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"]
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start ({exc}); reinstall the bubblewrap package"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        return (f"bwrap cannot create a user namespace as this user ({said}); run as root, or allow "
                "unprivileged user namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns=0 where "
                "AppArmor restricts them)")
    return None


def _hand_over(work: Path, uid: int, gid: int) -> None:
    """Give the work dir's tree to the sandbox user (links themselves, never their targets)."""
    os.lchown(work, uid, gid)
    for folder, dirs, files in os.walk(work):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def _controllers(limits: Limits) -> tuple[str, ...]:
    """The cgroup controllers this run needs: memory and cpuacct always, for the peak and the
    CPU time (bubblewrap's outer process exits without reaping the program, so its rusage
    holds neither), the others only for a limit that asks for them."""
    optional = {"pids": limits.processes, "cpuset": limits.cpus}
    return ("memory", "cpuacct", *(name for name, limit in optional.items() if limit is not None))


Groups = RunGroups | V2Groups


def make_groups(wanted: tuple[str, ...]) -> Groups:
    """The run's cgroups: v1 where its controllers are mounted and writable (root on a v1 or
    hybrid host), else a group under the unified (v2) hierarchy with the controllers it can
    have (root on a v2 host, or a subtree delegated to this user); empty where neither."""
    v1 = RunGroups.create(wanted)
    if v1.dirs:
        return v1
    v2 = V2Groups.create(wanted)
    if v2.dir is not None:  # even with no controller: cgroup.kill and cpu.stat
        return v2
    return v1


def _has_group(groups: Groups) -> bool:
    return bool(groups.dirs) if isinstance(groups, RunGroups) else groups.dir is not None


def _limit_groups(groups: Groups, limits: Limits, cpus: list[int] | None) -> list[str]:
    enforced = []
    if limits.memory_bytes is not None and groups.set_memory(limits.memory_bytes):
        enforced.append(f"memory={groups.kind}")
    if limits.processes is not None and groups.set_processes(limits.processes):
        enforced.append(f"processes={groups.kind}")
    if cpus is not None and groups.set_cpus(cpus):
        enforced.append(f"cpus={groups.kind}")
    if isinstance(groups, V2Groups) and groups.dir is not None:
        enforced.append("kill=cgroup-v2")  # cgroup.kill ends every process of the run
    return enforced


def _lower(pid: int, which: int, soft: int, hard: int | None = None) -> None:
    """Set a limit of ``pid`` no higher than its current hard limit (root here cannot raise one)."""
    _, current_hard = resource.prlimit(pid, which)
    hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
        soft = min(soft, hard)
    resource.prlimit(pid, which, (soft, hard))


class _Run:
    """One run's processes, pipes and measurements."""

    def __init__(self, spec: SandboxSpec, as_root: bool, groups: Groups, enforced: list[str],
                 cpus: list[int] | None, manager: UserManager | None = None) -> None:
        self.spec = spec
        self.manager = manager
        """A systemd user manager to start bwrap in a scope of (``systemd_scope.py``), else None."""
        self.cpus = cpus
        self.limits = spec.limits
        self.as_root = as_root
        self.groups = groups
        self.enforced = enforced
        self.watched = not groups.has("memory")
        """No memory cgroup: the RSS watchdog bounds memory, rusage measures the peak and CPU."""
        self.reaping = False
        self.watchdog: MemoryWatchdog | None = None
        self.usage: Usage | None = None
        self.started_ns = time.time_ns()
        """When the run began (a file at the size bound written since then is the run's)."""
        self.workfs: WorkFs | None = None
        if self.limits.work_bytes is not None:
            targets = [*dict(spec.ro_binds).values(), *gpu_devices(spec.gpus)]
            self.workfs = WorkFs(Path(spec.work_dir), mounted_under(spec.work_path, targets), self.limits.work_bytes,
                                 self.limits.keep_bytes)

    def go(self) -> SandboxResult:
        uid, gid = (self.spec.user.uid, self.spec.user.gid) if self.as_root else (os.getuid(), os.getgid())
        passwd, group = identity_files(uid, gid)
        passwd_r, group_r = _data_fd(passwd), _data_fd(group)
        block_r, block_w = os.pipe()
        status_r, status_w = os.pipe()
        tmp_bytes = self.limits.memory_bytes or (1 << 30)
        fds = BwrapFds(passwd_r, group_r, block_r, status_w, self._seccomp())
        argv = bwrap_args(self.spec, fds, as_root=self.as_root, tmp_bytes=tmp_bytes, work_bytes=self.limits.work_bytes)
        argv[0] = shutil.which("bwrap") or "bwrap"
        argv, options_r = options_in_fd(argv)
        if self.manager is not None:
            argv = [*scope_prefix(self.manager, self.limits), *argv]
        stdin = _stdin(self.spec.stdin)
        with subreaper() if self.watched else contextlib.nullcontext(False) as reaping:
            return self._start(argv, stdin, (*fds.handed(), options_r), block_w, status_r, reaping)

    def _seccomp(self) -> int | None:
        """The program's seccomp filter: SIGXFSZ kept at its default action, and as root no new
        user namespaces (non-root: bwrap's --disable-userns)."""
        found = program_filter(self.as_root)
        self.enforced.append("userns=disabled" if not self.as_root else
                             "userns=seccomp" if found is not None else "userns=open")
        if found is not None:
            self.enforced.append("sigxfsz=seccomp")
        return found

    def _start(self, argv: list[str], stdin: IO[bytes] | int, fds: tuple[int, ...], block_w: int,
               status_r: int, reaping: bool) -> SandboxResult:
        self.reaping = reaping
        try:
            proc = subprocess.Popen(
                [*argv, *self.spec.argv], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=self.spec.full_env(), pass_fds=fds, start_new_session=True, cwd="/")
        finally:
            for fd in fds:
                os.close(fd)
            if stdin is not subprocess.DEVNULL:
                stdin.close()  # type: ignore[union-attr]
        try:
            return self._supervise(proc, block_w, status_r)
        finally:
            for fd in (block_w, status_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            if self.workfs is not None:  # a run that failed before its end
                self.workfs.close()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()

    def _supervise(self, proc: subprocess.Popen[bytes], block_w: int, status_r: int) -> SandboxResult:
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        started = time.monotonic()
        child = _child_pid(status_r)
        child_fd = None
        if child is not None:
            child_fd = _pidfd(child)
            if self.manager is not None:
                self._adopt_scope(child)
            self._confine(child)
        os.write(block_w, b"go")
        deadline = time.monotonic() + self.limits.wall_s
        pid_fd = os.pidfd_open(proc.pid)
        try:
            got = pump(Child(pid_fd, out_fd, err_fd), cap=self.limits.output_bytes, deadline=deadline,
                       check=self._checks(child), tick_s=WATCH_TICK_S if self.watchdog else 0.1)
        finally:
            os.close(pid_fd)
        stopped = time.monotonic()
        if got.stop != "exited":
            _kill_unreaped(proc.pid)
            self.groups.kill_all()
            drain(out_fd, err_fd, got, self.limits.output_bytes)
        status, outer = _reap(proc)
        # only the CPU time of bwrap's own rusage: its ru_maxrss holds this process's peak RSS
        # (the kernel carries the parent's high-water mark through fork and exec)
        usage = Usage(0, outer.cpu_s)
        # a run stopped for a limit ran until that moment, not through the clean-up after it
        wall = (time.monotonic() if got.stop == "exited" else stopped) - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if child is not None and child_fd is not None:
            _wait_namespace_gone(child, child_fd)
            if self.reaping:  # the sandbox's PID 1, orphaned by bwrap, is this process's child now
                usage = usage.merge(_reap_orphan(child))
        if self.workfs is not None:
            self.workfs.bring_back()
        self.usage = usage
        return self._result(got, status, wall)

    def _adopt_scope(self, child: int) -> None:
        """The systemd scope bwrap was started in, as the run's group (its limits set by systemd)."""
        scope = V2Groups.adopt(child)
        if scope.dir is None:
            return
        self.groups.remove()
        self.groups = scope
        self.enforced += [entry for entry in scope_limits(self.limits)
                          if {"memory": "memory", "processes": "pids"}[entry.split("=")[0]] in scope.controllers]
        self.watched = not scope.has("memory")

    def _checks(self, child: int | None) -> Callable[[], str | None] | None:
        """What the parent's loop checks each tick: the run's CPU time (cgroup) and, without a
        memory cgroup, the process tree's resident memory."""
        if child is None:
            return None
        self.watched = self.watched or not self.groups.has("memory")  # a memory group that refused the pid
        if self.manager is not None:  # the scope's memory controller, where the user manager has one
            self.watched = not self.groups.has("memory")
        if self.watched:
            self.watchdog = MemoryWatchdog(child, self.limits.memory_bytes)
        checks = [check for check in (self._cpu_check(), self.watchdog, self._work_check()) if check is not None]
        if not checks:
            return None
        return lambda: next((word for word in (check() for check in checks) if word), None)

    def _confine(self, pid: int) -> None:
        """Cgroups, rlimits and CPUs for the waiting sandbox process (it has started nothing yet)."""
        refused = self.groups.add(pid)
        self.enforced = [e for e in self.enforced if e.split("=")[0] not in
                         {"memory" if c == "memory" else "processes" if c == "pids" else "cpus" for c in refused}]
        if isinstance(self.groups, V2Groups) and self.groups.dir is None:  # the group refused the pid: gone
            self.enforced = [e for e in self.enforced if not e.endswith("=cgroup-v2")]
        limits = self.limits
        if self.workfs is not None:
            try:
                owner = self.spec.user.uid if self.as_root else None
                self.workfs.fill(pid, os.path.normpath(self.spec.work_path), owner)
            except OSError as exc:
                raise UsageError(f"sandbox: could not copy work_dir {self.spec.work_dir} into its size-bounded "
                                 f"tmpfs ({exc}); raise limits.work_bytes or set it to None") from exc
            self.enforced.append("work_bytes=tmpfs")
        _lower(pid, resource.RLIMIT_CORE, 0)
        _lower(pid, resource.RLIMIT_FSIZE, limits.output_bytes)
        self.enforced.append("file_size=rlimit")
        if limits.cpu_s is not None:
            seconds = math.ceil(limits.cpu_s)
            _lower(pid, resource.RLIMIT_CPU, seconds, seconds + 1)  # SIGXCPU, then SIGKILL a second later
            self.enforced.append("cpu_s=rlimit" + (f"+{self.groups.kind}" if self.groups.has("cpuacct") else ""))
        if limits.memory_bytes is not None and not self._by_cgroup("memory"):
            self.enforced.append("memory=watchdog-rss")  # see watchdog.py: not an address-space rlimit
        if limits.processes is not None and not self._by_cgroup("processes"):
            _lower(pid, resource.RLIMIT_NPROC, limits.processes)
            self.enforced.append("processes=rlimit-nproc")
        if self.cpus is not None and not self._by_cgroup("cpus"):
            os.sched_setaffinity(pid, self.cpus)
            self.enforced.append("cpus=affinity")

    def _by_cgroup(self, limit: str) -> bool:
        """Whether a cgroup (this run's, or its systemd scope) bounds ``limit`` already."""
        return any(entry.startswith(f"{limit}=") for entry in self.enforced)

    def _work_check(self) -> Callable[[], str | None] | None:
        """Each tick: note whether the work dir's tmpfs is full (the run goes on; the verdict says it)."""
        workfs = self.workfs
        if workfs is None:
            return None

        def check() -> None:
            workfs.full()

        return check

    def _cpu_check(self) -> _CpuCheck | None:
        if self.limits.cpu_s is None or not self.groups.has("cpuacct"):
            return None
        return _CpuCheck(self.groups, self.limits.cpu_s)

    def _result(self, got: Captured, status: int, wall: float) -> SandboxResult:
        cpu = self.groups.cpu_seconds()
        peak = self.groups.peak_memory()
        watched_peak = None
        if self.watched:
            sampled = self.watchdog.peak if self.watchdog else 0
            peak = watched_peak = max(sampled, self.usage.peak_rss_bytes if self.usage else 0) or None
        if cpu is None and self.usage is not None and self.reaping:
            cpu = self.usage.cpu_s
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        stderr = bytes(got.stderr)
        setup_error = None
        if code == 1 and stderr.startswith((b"bwrap: ", b"setpriv: ", b"Failed to ")):  # last: systemd-run
            setup_error = stderr.decode(errors="replace").strip().splitlines()[0]
        big = _has_file_at(Path(self.spec.work_dir), self.limits.output_bytes, self.started_ns)  # EFBIG, caught or not
        ending = Ending(stop=got.stop, status=status, oom_kills=self.groups.oom_kills(), cpu_s=cpu or 0.0,
                        big_file=big, setup_error=setup_error, watched_peak=watched_peak,
                        forks_refused=self.groups.forks_refused(),
                        work_full=self.workfs.full() if self.workfs is not None else False)
        verdict, exit_code, sig, reason = decide(ending, self.limits)
        return SandboxResult(verdict=verdict, exit_code=exit_code, signal=sig, wall_s=wall, cpu_s=cpu,
                             peak_memory_bytes=peak, stdout=bytes(got.stdout), stderr=stderr,
                             truncated=got.truncated, reason=reason, backend=BubblewrapSandbox.name,
                             enforced=tuple(self.enforced),
                             dropped=self.workfs.dropped if self.workfs is not None else ())


class _CpuCheck:
    """The whole run's CPU time from the cpuacct group (RLIMIT_CPU bounds each process only)."""

    def __init__(self, groups: Groups, limit_s: float) -> None:
        self.groups = groups
        self.limit_s = limit_s

    def __call__(self) -> str | None:
        used = self.groups.cpu_seconds()
        return "cpu" if used is not None and used >= self.limit_s else None


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except OSError:  # already gone
        return None


def _wait_namespace_gone(pid: int, pid_fd: int) -> None:
    """Wait until the sandbox's PID 1 has exited, which the kernel allows only once every
    other process of its PID namespace is dead: then nothing the program started is left,
    with or without cgroups. bubblewrap's outer process exits first, without reaping it."""
    try:
        if not select.select([pid_fd], [], [], START_TIMEOUT_S)[0]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            select.select([pid_fd], [], [], START_TIMEOUT_S)
    finally:
        os.close(pid_fd)


def _data_fd(data: bytes) -> int:
    """A pipe's read end already holding ``data`` (small: it must fit the pipe buffer)."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    return read_end


def _stdin(data: bytes) -> IO[bytes] | int:
    if not data:
        return subprocess.DEVNULL
    handle = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the caller once the child has it
    handle.write(data)
    handle.seek(0)
    return handle


def _child_pid(status_r: int) -> int | None:
    """The sandbox process's PID from bubblewrap's first status document (None if it failed first)."""
    text = b""
    end = time.monotonic() + START_TIMEOUT_S
    while b"\n" not in text:
        ready, _, _ = select.select([status_r], [], [], max(end - time.monotonic(), 0.0))
        if not ready:
            return None
        chunk = os.read(status_r, 4096)
        if not chunk:
            return None
        text += chunk
    try:
        return int(json.loads(text.split(b"\n", 1)[0])["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _has_file_at(work: Path, size: int, since_ns: int = 0) -> bool:
    """Whether some regular file under ``work`` written since ``since_ns`` (its mtime) has
    reached ``size`` bytes (links not followed): a file the run was stopped at, not one that
    was there before it."""
    seen = 0
    stack = [work]
    while stack and seen < SCAN_LIMIT:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                if info.st_size >= size and info.st_mtime_ns >= since_ns:
                    return True
    return False


def _kill_unreaped(pid: int) -> None:
    """SIGKILL without ``Popen.kill``, which polls first and may reap the process, leaving
    :func:`_reap` nothing to wait for (the exit status would be lost)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, Usage]:
    """The raw wait status and rusage of ``proc``; one that something else already reaped is
    rebuilt from the return code Popen recorded (and no usage)."""
    try:
        _, status, usage = os.wait4(proc.pid, 0)
        return status, Usage.of(usage)
    except ChildProcessError:
        code = proc.returncode if proc.returncode is not None else 1
        return (-code if code < 0 else code << 8), Usage(0, 0.0)


def _reap_orphan(pid: int) -> Usage | None:
    """The rusage of the sandbox's PID 1 (it has exited) where it became this subreaper's
    child; None where bwrap's outer process reaped it first (its usage is then in bwrap's)."""
    try:
        got, _, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return Usage.of(usage) if got == pid else None
