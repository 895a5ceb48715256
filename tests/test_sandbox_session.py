"""A sandbox session for real: many runs in one bwrap, each with its own limits and verdict,
nothing of one run reaching the next, and the runner out of the programs' reach.

(The whole escape corpus also runs through a session: ``test_sandbox_bwrap.py``'s
``sandbox`` fixture is parametrized over single runs and a session.)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cmx_core.api import Limits, SandboxSpec, UsageError, Verdict
from cmx_core.sandbox.session import BubblewrapSession, session_unavailable
from cmx_core.testing import processes_with

PY = "/usr/bin/python3"


@pytest.fixture
def root(tmp_path: Path, require: Callable[[str | None, str], None]) -> Path:
    require(session_unavailable(), "sandbox sessions")
    (tmp_path / "root").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.txt").write_text("input\n")
    return tmp_path / "root"


@pytest.fixture
def session(root: Path) -> Iterator[BubblewrapSession]:
    with BubblewrapSession(root, {str(root.parent / "data"): "/data"}) as opened:
        yield opened


def _spec(root: Path, name: str, argv: list[str], **limits: float) -> SandboxSpec:
    work = root / name
    work.mkdir(exist_ok=True)
    return SandboxSpec(argv=argv, work_dir=work, limits=Limits(**{"wall_s": 10.0, **limits}))  # type: ignore[arg-type]


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_runs_get_their_own_work_dir_inputs_and_user(session: BubblewrapSession, root: Path) -> None:
    result = session.run(_spec(root, "a", ["sh", "-c", "pwd; id -u; cat /data/in.txt; echo x > out"]))
    assert result.verdict is Verdict.OK, result
    assert result.text().splitlines() == ["/work/a", "65534", "input"]
    assert (root / "a" / "out").read_text() == "x\n"
    assert "runner=session" in result.enforced


def test_nothing_of_one_run_is_left_for_the_next(session: BubblewrapSession, root: Path) -> None:
    marker = f"1000.{int(uuid.uuid4().hex[:6], 16)}"
    first = session.run(_spec(root, "a", ["sh", "-c", f"touch /tmp/left /dev/shm/left 2>/dev/null; "
                                                      f"setsid sleep {marker} >/dev/null 2>&1 & echo ok"]))
    assert first.verdict is Verdict.OK and first.text() == "ok\n", first
    assert processes_with(f"sleep {marker}") == []  # killed before run() returned
    second = session.run(_spec(root, "b", ["sh", "-c", "ls -A /tmp /dev/shm; ps -eo comm"]))
    assert second.verdict is Verdict.OK, second
    lines = second.text().split()
    assert "left" not in lines and "sleep" not in lines


def test_each_run_has_its_own_memory_limit_and_peak(session: BubblewrapSession, root: Path) -> None:
    grow = "x = bytearray({} << 20); x[::4096] = b'y' * ({} << 8)"
    small = session.run(_spec(root, "a", [PY, "-c", grow.format(96, 96)], memory_bytes=160 << 20))
    assert small.verdict is Verdict.OK, small
    big = session.run(_spec(root, "b", [PY, "-c", grow.format(400, 400)], memory_bytes=160 << 20))
    assert big.verdict is Verdict.MEMORY_LIMIT, big
    again = session.run(_spec(root, "c", [PY, "-c", grow.format(96, 96)], memory_bytes=160 << 20))
    assert again.verdict is Verdict.OK, again  # the session survives the OOM kill of a run
    for result in (small, again):
        assert result.peak_memory_bytes is not None and 96 << 20 <= result.peak_memory_bytes <= 160 << 20


def test_the_program_cannot_kill_or_trace_the_runner(session: BubblewrapSession, root: Path) -> None:
    script = "kill -9 -1; kill -9 1 2; cat /proc/2/environ; echo done"
    hostile = session.run(_spec(root, "a", ["sh", "-c", script]))
    assert hostile.verdict in (Verdict.OK, Verdict.KILLED, Verdict.ERROR), hostile
    assert b"PATH=" not in hostile.stdout  # the runner's environment is not readable
    after = session.run(_spec(root, "b", ["echo", "still here"]))
    assert after.verdict is Verdict.OK and after.text() == "still here\n", after


def test_the_runner_and_the_init_are_invisible_to_the_program(session: BubblewrapSession, root: Path) -> None:
    """The session's /proc hides other users' processes (hidepid=invisible): the program sees
    itself and its own children, not the root runner (PID 2) or bubblewrap's init (PID 1)."""
    script = ("sleep 5 & echo \"pids $$ $! $(ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' ')\"; "
              "cat /proc/2/cmdline /proc/1/cmdline 2>&1; kill $!")
    seen = session.run(_spec(root, "a", ["sh", "-c", script]))
    assert seen.verdict is Verdict.OK and "proc=hidepid" in seen.enforced, seen
    first, *rest = seen.text().splitlines()
    shell, sleeper, *listed = first.split()[1:]
    assert {shell, sleeper} <= set(listed) and not {"1", "2"} & set(listed), first
    assert [line for line in rest if "No such file" in line] == rest and len(rest) == 2, rest
    assert Path(f"/proc/{session.runner_pid}").is_dir()  # the host still sees it


FILL = ("for i in $(seq 0 63); do dd if=/dev/zero of=f$i bs=1M count=8 2>/dev/null "
        "|| { echo full at $i; break; }; done; for i in $(seq 1000); do : > e$i; done")


def test_each_run_has_its_own_work_dir_bound_with_a_disk_verdict(session: BubblewrapSession, root: Path) -> None:
    """A run's work dir is a tmpfs of its work_bytes for that run (#54 item 1): 8 MiB files stop
    at the bound (ENOSPC: dd fails; the given file holds a page, so the 8th), empty files after them still
    take no block, the verdict says so, what it left comes back within the bound, and the next
    run starts with a bound of its own."""
    (root / "a").mkdir()
    (root / "a" / "given.txt").write_text("given")
    filled = session.run(_spec(root, "a", ["sh", "-c", FILL], work_bytes=64 << 20, memory_bytes=256 << 20,
                                output_bytes=16 << 20))
    assert filled.verdict is Verdict.DISK_LIMIT and filled.exit_code == 0, filled
    assert "full at 7" in filled.text() and filled.enforced_by["work_bytes"] == "tmpfs", filled
    left = list((root / "a").iterdir())
    assert len(left) == 1 + 8 + 1000 and sum(path.stat().st_size for path in left) <= 64 << 20
    assert (root / "a" / "given.txt").read_text() == "given"
    after = session.run(_spec(root, "b", ["sh", "-c", "df -k . | tail -1; echo x > out"],
                              work_bytes=4 << 20))
    assert after.ok and after.text().split()[1] == "4096", after  # its own 4 MiB tmpfs
    assert (root / "b" / "out").read_text() == "x\n"
    unbounded = session.run(_spec(root, "c", ["sh", "-c", "echo y > out"], work_bytes=None))  # type: ignore[arg-type]
    assert unbounded.ok and "work_bytes" not in unbounded.enforced_by, unbounded
    assert (root / "c" / "out").read_text() == "y\n"


def test_a_work_dir_outside_the_root_or_other_inputs_are_usage_errors(session: BubblewrapSession, root: Path,
                                                                      tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with pytest.raises(UsageError, match="not under the session root"):
        session.run(SandboxSpec(argv=["true"], work_dir=outside))
    other = SandboxSpec(argv=["true"], work_dir=root, ro_binds={str(tmp_path): "/other"})
    with pytest.raises(UsageError, match="not mounted in this session"):
        session.run(other)


def test_closing_leaves_no_process_and_no_cgroup(root: Path) -> None:
    mine = f"cmx-sandbox-{os.getpid()}-*"  # this process's: other cmx processes make and remove their own meanwhile
    before = set(Path("/sys/fs/cgroup/memory").rglob(mine))
    with BubblewrapSession(root) as opened:
        assert opened.run(_spec(root, "a", ["true"])).ok
        runner, init = opened.runner_pid, opened.init_pid
        assert opened.mounts is not None and opened.mounts.proc is not None
        helper = opened.mounts.proc.pid  # the host-side helper in the session's mount namespace
        assert Path(f"/proc/{runner}").exists() and _running(helper)
    assert not _running(runner) and not _running(init) and not _running(helper)
    assert set(Path("/sys/fs/cgroup/memory").rglob(mine)) <= before  # none of the session's is left


def test_a_session_is_pinned_to_the_cpus_it_was_given(root: Path) -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    with BubblewrapSession(root, cpus=[cpu]) as opened:
        result = opened.run(_spec(root, "a", ["sh", "-c", "grep Cpus_allowed_list /proc/self/status"]))
    assert result.verdict is Verdict.OK, result
    assert result.text().split()[-1] == str(cpu)


def test_gpus_or_shm_in_a_session_are_refused(session: BubblewrapSession, root: Path) -> None:
    with pytest.raises(UsageError, match="not offered in a session"):
        session.run(SandboxSpec(argv=["true"], work_dir=root, gpus=-1))
