"""cgroup v2 as non-root (#36 item 2): a subtree delegated to the user, and systemd's user scope.

For real (root, to set it up): on this machine's cgroup2 mount beside v1 the test makes a
directory, delegates it to an unprivileged user it creates (the directory, ``cgroup.procs``,
``cgroup.subtree_control`` and ``cgroup.threads`` owned by the user, as the kernel's cgroup-v2
documentation describes delegation), starts a process of that user inside it and runs the
sandbox there as that user. The sandbox finds the subtree from ``/proc/self/cgroup``, makes
each run's group in it, and the result names what that hierarchy really offers:
``kill=cgroup-v2`` (``cgroup.kill``) and ``cpu_s=rlimit+cgroup-v2`` (``cpu.stat``) for real,
and for memory and processes the controller where the hierarchy offers it, else the
fallback it got (``watchdog-rss``, ``rlimit-nproc``): here the memory and pids controllers
are bound to v1, so those are the fallbacks, and an allocation past the limit is still a
memory verdict.

The systemd user manager path (``systemd-run --user --scope``) cannot run here: no user
manager runs on these machines. Its detection is tested against what is here (none: a clean
fallback) and against a real Unix socket at the manager's path, and the scope's command line
and the adoption of a group someone else made against a real process on the unified mount.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import filelock
import pyseccomp  # type: ignore[import-untyped]
import pytest

import cmx_core
from cmx_core.api import Limits, UsageError
from cmx_core.sandbox import cgroup2, systemd_scope
from cmx_core.sandbox.cgroup2 import V2Groups

PACKAGE = Path(cmx_core.__file__).resolve().parent


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("setting up a delegated cgroup and a user needs root")
    for tool in ("useradd", "userdel", "runuser", "bwrap"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


@pytest.fixture(scope="module")
def unified() -> Path:
    """This process's group on the machine's cgroup2 mount (beside v1)."""
    _need_root()
    mounts, own = cgroup2.unified_mounts(), cgroup2.own_path()
    if not mounts or own is None:
        pytest.skip("no cgroup2 hierarchy is mounted")
    parent = mounts[0] / own.lstrip("/")
    if not (parent / "cgroup.procs").is_file():
        pytest.skip(f"{parent} is not this process's cgroup2 group")
    return parent


@dataclass(frozen=True)
class Delegated:
    user: str
    uid: int
    home: Path
    group: Path

    def run_inside(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``script`` (Python) as the user, in a process moved into the delegated group first."""
        path = self.home / "probe.py"
        path.write_text(script)
        env = ["env", "-i", f"HOME={self.home}", f"CMX_HOME={self.home}/cmx-home", "PATH=/usr/bin:/bin",
               f"PYTHONPATH={self.home}/lib", "LANG=C.UTF-8"]
        inner = ["runuser", "-u", self.user, "--", *env, "/usr/bin/python3", str(path)]
        command = f'echo $$ > {self.group}/cgroup.procs && exec "$@"'
        return subprocess.run(["sh", "-c", command, "sh", *inner], capture_output=True, text=True,
                              timeout=timeout, check=False)


def _library(home: Path) -> None:
    """cmx-core and the third-party imports of its sandbox (filelock; pyseccomp, one module over
    libseccomp, for the program's seccomp filter), for the system python."""
    lib = home / "lib"
    shutil.copytree(PACKAGE, lib / "cmx_core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(filelock.__file__).parent, lib / "filelock", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(pyseccomp.__file__, lib / "pyseccomp.py")


def _empty_and_remove(group: Path) -> None:
    for child in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        V2Groups(child).kill_all()
        child.rmdir()
    V2Groups(group).kill_all()
    group.rmdir()


@pytest.fixture(scope="module")
def delegated(unified: Path) -> Iterator[Delegated]:
    name = f"cmx-d-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
    info = pwd.getpwnam(name)
    group = unified / f"cmx-delegated-{name}"
    group.mkdir()
    try:
        for path in (group, *(group / f for f in ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads"))):
            os.chown(path, info.pw_uid, info.pw_gid)
        home = Path(info.pw_dir)
        _library(home)
        subprocess.run(["chown", "-R", f"{name}:", str(home)], check=True)
        yield Delegated(name, info.pw_uid, home, group)
    finally:
        _empty_and_remove(group)
        subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)
        shutil.rmtree(info.pw_dir, ignore_errors=True)


PROBE = """
import json, os, pathlib
from cmx_core.sandbox import cgroup2
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox
from cmx_core.sandbox.spec import Limits, SandboxSpec

work = pathlib.Path.home() / "work"
work.mkdir(exist_ok=True)
box = BubblewrapSandbox()
def run(code, **limits):
    spec = SandboxSpec(argv=["/usr/bin/python3", "-c", code], work_dir=str(work),
                       limits=Limits(wall_s=60, **limits))
    result = box.run(spec)
    return {"verdict": result.verdict.value, "enforced_by": result.enforced_by, "cpu_s": result.cpu_s,
            "peak": result.peak_memory_bytes, "reason": result.reason, "stdout": result.text()}
spin = "import subprocess; subprocess.Popen(['setsid', 'sleep', '600']); x = sum(range(3 * 10**6)); print('done')"
print(json.dumps({"uid": os.geteuid(), "parent": str(cgroup2.parent_group()),
                  "ok": run(spin, memory_bytes=256 << 20, processes=16, cpu_s=30),
                  "hog": run("x = b'x' * (512 << 20)", memory_bytes=128 << 20),
                  "left": sorted(p.name for p in cgroup2.parent_group().iterdir() if p.is_dir())}))
"""


def test_a_delegated_subtree_gives_the_user_its_runs_groups(delegated: Delegated) -> None:
    done = delegated.run_inside(PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["uid"] == delegated.uid != 0 and got["parent"] == str(delegated.group)
    offered = set((delegated.group / "cgroup.controllers").read_text().split())
    ok = got["ok"]
    assert ok["verdict"] == "ok" and ok["stdout"] == "done\n", ok
    assert ok["enforced_by"] == {
        "memory": "cgroup-v2" if "memory" in offered else "watchdog-rss",
        "processes": "cgroup-v2" if "pids" in offered else "rlimit-nproc",
        "cpu_s": "rlimit+cgroup-v2", "kill": "cgroup-v2", "work_bytes": "tmpfs", "file_size": "rlimit",
        "userns": "disabled", "sigxfsz": "seccomp"}, ok
    assert ok["cpu_s"] > 0 and ok["peak"] > 0  # CPU time from cpu.stat, the peak from the watchdog/rusage
    hog = got["hog"]
    assert hog["verdict"] == "memory_limit", hog  # the same verdict as with a memory cgroup
    assert got["left"] == []  # each run's group removed
    assert [p for p in delegated.group.iterdir() if p.is_dir()] == []


def test_the_delegated_daemon_is_gone_after_the_run(delegated: Delegated) -> None:
    alive = [pid for pid in os.listdir("/proc") if pid.isdigit() and _uid_of(pid) == delegated.uid]
    for pid in alive:  # only the probe's processes could be there; none may be
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        assert b"sleep 600" not in cmdline, cmdline


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_a_configured_group_that_is_not_delegated_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"CMX_SANDBOX_CGROUP=.*not a cgroup v2 directory.*delegate it"):
        cgroup2.parent_group({"CMX_SANDBOX_CGROUP": str(tmp_path)})
    (tmp_path / "cgroup.procs").write_text("")
    (tmp_path / "cgroup.subtree_control").write_text("")
    assert cgroup2.parent_group({"CMX_SANDBOX_CGROUP": str(tmp_path)}) == tmp_path  # writable by this user


def test_no_user_manager_here_is_a_clean_fallback() -> None:
    # root makes its own groups; another user gets a manager only where its socket is there
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}")
    there = os.geteuid() != 0 and (runtime / "systemd" / "private").is_socket()
    assert (systemd_scope.user_manager() is not None) is (there and shutil.which("systemd-run") is not None)
    assert systemd_scope.user_manager({"XDG_RUNTIME_DIR": "/nonexistent"}, uid=4242) is None


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder under /tmp with a short name (pytest's tmp_path under a deep TMPDIR is too long
    for a unix socket's path)."""
    folder = Path(tempfile.mkdtemp(prefix="cmxsd-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_user_manager_is_found_by_its_socket(short_tmp: Path) -> None:
    tmp_path = short_tmp  # the socket path must fit AF_UNIX's 108 bytes whatever TMPDIR is
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_run = bindir / "systemd-run"
    fake_run.write_text("#!/bin/sh\nexit 1\n")
    fake_run.chmod(0o755)
    env = {"XDG_RUNTIME_DIR": str(tmp_path), "PATH": str(bindir)}
    (tmp_path / "systemd").mkdir()
    (tmp_path / "systemd" / "private").write_text("")  # a file, not the manager's socket
    assert systemd_scope.user_manager(env, uid=4242) is None
    (tmp_path / "systemd" / "private").unlink()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "systemd" / "private"))
        found = systemd_scope.user_manager(env, uid=4242)
        assert found == systemd_scope.UserManager(str(fake_run), tmp_path / "systemd" / "private")
        assert systemd_scope.user_manager(env, uid=0) is None  # root never asks for a scope
        prefix = systemd_scope.scope_prefix(found, Limits(memory_bytes=1 << 30, processes=32))
    assert prefix == [str(fake_run), "--user", "--scope", "--quiet", "--collect", "-p", "Delegate=yes",
                      "-p", f"MemoryMax={1 << 30}", "-p", "MemorySwapMax=0", "-p", "TasksMax=33", "--"]
    assert systemd_scope.scope_limits(Limits(memory_bytes=None, processes=4)) == ["processes=systemd-scope"]


def test_a_group_made_by_another_is_adopted_not_removed(unified: Path) -> None:
    """What a systemd scope is to the sandbox: the group a process already is in, measured and
    ended but neither limited nor removed."""
    made = unified / f"cmx-adopt-{uuid.uuid4().hex[:8]}"
    made.mkdir()
    proc = subprocess.Popen(["sleep", "60"])
    try:
        (made / "cgroup.procs").write_text(str(proc.pid))
        scope = V2Groups.adopt(proc.pid)
        assert scope.dir == made and not scope.owned and scope.add(proc.pid) == []
        assert not scope.set_memory(1 << 20) and scope.pids() == [proc.pid]
        assert scope.kill_all() == [proc.pid] and proc.wait(timeout=10) == -signal.SIGKILL
        scope.remove()
        assert made.is_dir()  # left to whoever made it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        made.rmdir()
