"""A bubblewrap sandbox that stays up for many runs: one ``bwrap`` and one set of cgroups
for a whole batch (an ALE-Bench evaluation's cases and tester calls), each run still under
its own limits and with a verdict of its own.

A single run pays for bubblewrap's namespaces and mounts, the PID namespace's teardown and
the move into the cgroups (tens of milliseconds, most of it waiting in the kernel). A
session pays that once. Inside it, a small runner (``inner.py``, root with only the
capabilities it needs) starts each program as the non-root user through ``setpriv`` with
the run's rlimits; this process (the host side) passes it the program's stdin, stdout and
stderr as file descriptors, gets back the program's pidfd, and supervises the run as a
single run is supervised: the output cap, the wall deadline, the CPU time of the whole run
from the session's ``cpuacct`` group (reset before each run), the memory limit as the
session's memory group limit set to what is charged before the run plus the run's limit
(the runner cannot be the OOM killer's victim), the process count from ``pids.max``.
When the program exits, everything else it started is killed before the next run, and the
runner empties ``/tmp`` and ``/dev/shm``.

What a session shares across its runs, unlike single runs: one mount namespace (the
session root read-write, each run's work dir below it handed to the sandbox user, the
inputs read-only), one network namespace without a network, one PID namespace. A run can
see the work dirs of earlier runs of the same session, so a session is for runs of one
submission (the cases of one evaluation), never for code of different owners.
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.sandbox.bubblewrap import (
    START_TIMEOUT_S,
    BubblewrapSandbox,
    _child_pid,
    _CpuCheck,
    _data_fd,
    _hand_over,
    _has_file_at,
    _pidfd,
    _wait_namespace_gone,
)
from cmx_core.sandbox.bwrap_args import BwrapFds, bwrap_args, check_program, identity_files, options_in_fd
from cmx_core.sandbox.capture import Child, drain, pump
from cmx_core.sandbox.cgroups import RunGroups
from cmx_core.sandbox.nsmount import NamespaceMounts
from cmx_core.sandbox.result import SandboxResult
from cmx_core.sandbox.seccomp import program_filter
from cmx_core.sandbox.spec import NOBODY, SandboxSpec, SandboxUser, check_spec
from cmx_core.sandbox.verdict import Ending, decide
from cmx_core.sandbox.workfs import WorkFs, check_fits, mounted_under

RUNNER = Path(__file__).with_name("inner.py")
RUNNER_AT = "/.cmx/runner.py"
ROOT_AT = "/work"
RUNNER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
"""setuid/setgid/setpcap for the drop to the sandbox user; dac_override/fowner to empty ``/tmp`` of the user's files."""


@dataclass(frozen=True)
class _RunStart:
    """The session's counters when a run starts; the run's own figures are what they grew by."""

    memory_bytes: int
    oom_kills: int
    forks_refused: int
    time_ns: int


def session_unavailable() -> str | None:
    """None when sessions can run here, else why not (they need root and cgroup v1 memory and cpuacct)."""
    why = BubblewrapSandbox().available()
    if why:
        return why
    if os.geteuid() != 0:
        return "a sandbox session needs root (it drops each program to the sandbox user itself)"
    probe = RunGroups.create(("memory", "cpuacct"))
    try:
        if not (probe.has("memory") and probe.has("cpuacct")):
            return "a sandbox session needs writable cgroup v1 memory and cpuacct controllers"
    finally:
        probe.remove()
    return None


class BubblewrapSession:
    """One long-lived sandbox rooted at ``root`` (mounted at ``/work``) with ``ro_binds``;
    ``run(spec)`` runs one program whose ``work_dir`` lies under ``root`` and whose inputs are
    among the session's. Use as a context manager; runs are one at a time (a lock).
    ``root_fs``: the session's system root (an exported image's, see :class:`SandboxSpec`);
    every run of the session has it, and the runner is that root's ``python3``."""

    def __init__(self, root: str | os.PathLike[str], ro_binds: Mapping[str, str] | None = None, *,
                 cpus: list[int] | None = None, user: SandboxUser | None = None,
                 root_fs: str | None = None) -> None:
        why = session_unavailable()
        if why:
            raise UsageError(f"sandbox session cannot start: {why}")
        self.root = Path(os.path.realpath(root))
        self.binds = dict(ro_binds or {})
        self.root_fs = root_fs
        self.user = user or SandboxUser(NOBODY, NOBODY)
        self.lock = threading.Lock()
        self.groups = RunGroups.create(("memory", "cpuacct", "pids", *(("cpuset",) if cpus else ())))
        self.enforced = ["memory=cgroup", "cpu_s=rlimit+cgroup", "file_size=rlimit"]
        if cpus and self.groups.set_cpus(cpus):
            self.enforced.append("cpus=cgroup")
        self.init_pid = self.runner_pid = 0
        self.mounts: NamespaceMounts | None = None
        """The helper that makes the session's mounts from the host (``nsmount.py``)."""
        self.control: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> BubblewrapSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _start(self) -> None:
        host_end, inner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = host_end
        spec = SandboxSpec(argv=["/usr/bin/python3", "-I", "-S", RUNNER_AT, str(inner_end.fileno())],
                           work_dir=str(self.root), work_path=ROOT_AT,
                           ro_binds={**self.binds, str(RUNNER): RUNNER_AT}, root_fs=self.root_fs)
        check_spec(spec)
        passwd, group = identity_files(self.user.uid, self.user.gid)
        passwd_r, group_r = _data_fd(passwd), _data_fd(group)
        block_r, block_w = os.pipe()
        status_r, status_w = os.pipe()
        fds = BwrapFds(passwd_r, group_r, block_r, status_w, program_filter(as_root=True))
        self.enforced += ["userns=seccomp", "sigxfsz=seccomp"] if fds.seccomp is not None else ["userns=open"]
        argv = bwrap_args(spec, fds, as_root=True, tmp_bytes=1 << 30, keep_caps=RUNNER_CAPS)
        argv[0] = shutil.which("bwrap") or "bwrap"
        argv, options_r = options_in_fd(argv)
        ours = (*fds.handed(), options_r)
        try:
            self.proc = subprocess.Popen([*argv, *spec.argv], stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=self.log, env=spec.full_env(), pass_fds=(*ours, inner_end.fileno()),
                                         start_new_session=True, cwd="/")
        finally:
            for fd in ours:
                os.close(fd)
            inner_end.close()
        try:
            self._confine(status_r, block_w)
        finally:
            os.close(status_r)
            os.close(block_w)

    def _confine(self, status_r: int, block_w: int) -> None:
        child = _child_pid(status_r)
        if child is None:
            raise UsageError(f"sandbox session: bubblewrap could not start: {self._log_line()}")
        self.init_pid = child
        if self.groups.add(child):
            raise UsageError("sandbox session: the cgroups refused the sandbox's process")
        _protect(child)
        os.write(block_w, b"go")
        self._receive()  # {"ready": true}
        self.runner_pid = _only_child(child)
        _protect(self.runner_pid)
        self.mounts = NamespaceMounts(child)
        if self.mounts.hide_processes():  # the runner and bwrap's init: invisible to the programs
            self.enforced.append("proc=hidepid")

    def _log_line(self) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip()
        return text.splitlines()[-1] if text else "no message"

    def _receive(self, timeout_s: float = START_TIMEOUT_S) -> tuple[dict[str, Any], list[int]]:
        assert self.control is not None
        if not select.select([self.control], [], [], timeout_s)[0]:
            raise UsageError(f"sandbox session: the runner did not answer within {timeout_s:g} s: {self._log_line()}")
        data, fds, _, _ = socket.recv_fds(self.control, 1 << 16, 2)
        if not data:
            raise UsageError(f"sandbox session: the runner has gone: {self._log_line()}")
        message: dict[str, Any] = json.loads(data)
        return message, fds

    def inside(self, work_dir: str | os.PathLike[str]) -> str:
        """The path of ``work_dir`` (under the session root) inside the sandbox."""
        real = Path(os.path.realpath(work_dir))
        if real != self.root and self.root not in real.parents:
            raise UsageError(f"sandbox session: work_dir {os.fspath(work_dir)!r} is not under the session root "
                             f"{self.root}; create it there")
        rel = real.relative_to(self.root).as_posix()
        return ROOT_AT if rel == "." else f"{ROOT_AT}/{rel}"

    def run(self, spec: SandboxSpec) -> SandboxResult:
        """Run ``spec`` in the session: the same checks, limits and verdicts as a single run."""
        with self.lock:
            cwd = self.inside(spec.work_dir)
            extra = {host: at for host, at in dict(spec.ro_binds).items() if self.binds.get(host) != at}
            if extra:
                raise UsageError(f"sandbox session: ro_binds {extra} are not mounted in this session; "
                                 "open the session with them")
            if spec.gpus or spec.shm_bytes is not None:
                raise UsageError("sandbox session: gpus and shm_bytes are not offered in a session; "
                                 "run such a spec on its own (BubblewrapSandbox().run)")
            if spec.root_fs != self.root_fs:
                raise UsageError(f"sandbox session: root_fs {spec.root_fs!r} is not this session's "
                                 f"({self.root_fs!r}); open a session with it")
            spec = replace(spec, work_path=cwd, ro_binds=self.binds, user=self.user)
            check_spec(spec)
            check_program(spec)
            _hand_over(Path(spec.work_dir), self.user.uid, self.user.gid)
            workfs = self._work_fs(spec, cwd)
            try:
                return self._run(spec, workfs)
            finally:
                if workfs is not None:
                    workfs.close()
                    self._unmount(cwd)

    def _work_fs(self, spec: SandboxSpec, cwd: str) -> WorkFs | None:
        """The run's work dir as a tmpfs of ``limits.work_bytes``, mounted over ``cwd`` in the
        session's mount namespace for this run and filled from the host's work dir (as a single
        run's is). None without a bound, or where one of the session's inputs is mounted under
        ``cwd`` (a tmpfs there would hide it): the result's ``enforced`` then has no ``work_bytes``."""
        bound = spec.limits.work_bytes
        if bound is None:
            return None
        host = Path(spec.work_dir)
        check_fits(host, bound)
        mounts = self.mounts
        if mounted_under(cwd, list(self.binds.values())) or mounts is None or not mounts.mount_tmpfs(cwd, bound):
            return None
        workfs = WorkFs(host, (), bound, spec.limits.keep_bytes)
        try:
            workfs.fill(self.init_pid, cwd, self.user.uid)
        except (OSError, RuntimeError) as exc:
            workfs.close()
            self._unmount(cwd)
            raise UsageError(f"sandbox session: could not copy work_dir {host} into its size-bounded tmpfs "
                             f"({exc}); raise limits.work_bytes or set it to None") from exc
        return workfs

    def _unmount(self, cwd: str) -> None:
        if self.mounts is not None:
            self.mounts.unmount(cwd)

    def _request(self, spec: SandboxSpec) -> dict[str, Any]:
        limits = spec.limits
        rlimits = [(resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_FSIZE, limits.output_bytes, limits.output_bytes)]
        if limits.cpu_s is not None:
            seconds = math.ceil(limits.cpu_s)
            rlimits.append((resource.RLIMIT_CPU, seconds, seconds + 1))
        env = {**spec.full_env(), **({"HOME": spec.work_path} if "HOME" not in spec.env else {})}
        return {"argv": list(spec.argv), "env": env, "cwd": spec.work_path, "uid": self.user.uid,
                "gid": self.user.gid, "rlimits": rlimits}

    def _limit(self, spec: SandboxSpec) -> _RunStart:
        """Set the run's memory and process bounds on the session's groups; the counters they start from."""
        self.groups.reset_counters()
        base = self.groups.memory_usage() or 0
        memory = spec.limits.memory_bytes
        self.groups.resize_memory(base + memory if memory is not None else (1 << 62))
        processes = spec.limits.processes
        bounded = self.groups.set_processes(processes + 2 if processes is not None else 1 << 22)
        if bounded and processes is not None and "processes=cgroup" not in self.enforced:
            self.enforced.append("processes=cgroup")
        return _RunStart(memory_bytes=base, oom_kills=self.groups.oom_kills(),
                         forks_refused=self.groups.forks_refused(), time_ns=time.time_ns())

    def _run(self, spec: SandboxSpec, workfs: WorkFs | None) -> SandboxResult:
        assert self.control is not None
        start = self._limit(spec)
        stdin = _stdin_fd(spec.stdin)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            socket.send_fds(self.control, [json.dumps(self._request(spec)).encode()], [stdin, out_w, err_w])
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
        started = time.monotonic()
        try:
            check = _checks(_CpuCheck(self.groups, spec.limits.cpu_s) if spec.limits.cpu_s is not None else None,
                            workfs)
            # the control socket turns readable when the runner reports the program's exit
            got = pump(Child(self.control.fileno(), out_r, err_r), cap=spec.limits.output_bytes,
                       deadline=started + spec.limits.wall_s, check=check, on_exit=self._kill_rest)
            if got.stop != "exited":
                self._kill_rest()
                drain(out_r, err_r, got, spec.limits.output_bytes)
            message, _ = self._receive()
            wall = time.monotonic() - started
        finally:
            os.close(out_r)
            os.close(err_r)
        self._kill_rest()
        if workfs is not None:  # nothing of the run is left to write to it
            workfs.bring_back()
        status = int(message["status"])
        if os.WIFSIGNALED(status):  # as bubblewrap reports a signal: 128 + N
            status = (128 + os.WTERMSIG(status)) << 8
        return self._result(spec, got, status, wall, start, workfs)

    def _kill_rest(self) -> None:
        """SIGKILL every process of the session but its init and the runner, until none is left."""
        self.groups.kill_all(spare=frozenset((self.init_pid, self.runner_pid)))

    def _result(self, spec: SandboxSpec, got: Any, status: int, wall: float, start: _RunStart,
                workfs: WorkFs | None) -> SandboxResult:
        cpu = self.groups.cpu_seconds()
        peak = self.groups.peak_memory()
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        stderr = bytes(got.stderr)
        setup_error = None
        if code == 127 and stderr.startswith(b"sandbox: "):
            setup_error = stderr.decode(errors="replace").strip().splitlines()[0]
        big = _has_file_at(Path(spec.work_dir), spec.limits.output_bytes, start.time_ns)  # EFBIG, caught or not
        ending = Ending(stop=got.stop, status=status, oom_kills=self.groups.oom_kills() - start.oom_kills,
                        cpu_s=cpu or 0.0, big_file=big, setup_error=setup_error,
                        forks_refused=self.groups.forks_refused() - start.forks_refused,
                        work_full=workfs is not None and workfs.was_full)
        verdict, exit_code, sig, reason = decide(ending, spec.limits)
        enforced = (*self.enforced, *(("work_bytes=tmpfs",) if workfs is not None else ()), "runner=session")
        return SandboxResult(verdict=verdict, exit_code=exit_code, signal=sig, wall_s=wall, cpu_s=cpu,
                             peak_memory_bytes=None if peak is None else max(peak - start.memory_bytes, 0),
                             stdout=bytes(got.stdout), stderr=stderr, truncated=got.truncated, reason=reason,
                             backend=BubblewrapSandbox.name, enforced=enforced,
                             dropped=workfs.dropped if workfs is not None else ())

    def close(self) -> None:
        """End the session: the runner sees the socket close and exits; nothing is left behind."""
        if self.mounts is not None:
            self.mounts.close()
            self.mounts = None
        if self.control is not None:
            self.control.close()
            self.control = None
        init_fd = _pidfd(self.init_pid) if self.init_pid else None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if init_fd is not None:
            _wait_namespace_gone(self.init_pid, init_fd)
        self.groups.kill_all()
        self.groups.remove()
        self.log.close()


def _checks(cpu: _CpuCheck | None, workfs: WorkFs | None) -> Callable[[], str | None] | None:
    """Each tick: note whether the work dir's tmpfs is full (the run goes on; the verdict says
    it), and stop the run at its CPU time."""
    if workfs is None:
        return cpu

    def check() -> str | None:
        workfs.full()
        return cpu() if cpu is not None else None

    return check


def _protect(pid: int) -> None:
    """Keep the OOM killer off ``pid`` (the session's init and runner; programs reset it)."""
    try:
        Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")
    except OSError:
        pass


def _only_child(pid: int) -> int:
    """The one child of ``pid`` (the runner under bubblewrap's init)."""
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    if len(found) != 1:
        raise UsageError(f"sandbox session: expected one runner under the sandbox's init, found {found}")
    return int(found[0])


def _stdin_fd(data: bytes) -> int:
    if not data:
        return os.open(os.devnull, os.O_RDONLY)
    with tempfile.TemporaryFile() as handle:
        handle.write(data)
        handle.seek(0)
        return os.dup(handle.fileno())


__all__ = ["BubblewrapSession", "session_unavailable"]
