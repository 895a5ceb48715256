"""The sandbox's total-size bound on the work dir and the limits a program hits but catches (#28 item 6).

Real programs in the real bubblewrap sandbox: six 60 MiB files under a 256 MiB total bound
are a ``disk_limit`` verdict; a program that catches EAGAIN from ``fork`` (the pids cgroup's
``pids.max``) is ``process_limit``; one that ignores SIGXFSZ and catches EFBIG is
``output_limit``, each with the program's own exit code 0. Plus the work dir's round trip
through its tmpfs (files in, changes and deletions out, a FIFO and a link left as they must be)
and the verdicts as a pure function.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cmx_core.api import Limits, SandboxResult, SandboxSpec, UsageError, Verdict
from cmx_core.sandbox.bubblewrap import BubblewrapSandbox
from cmx_core.sandbox.session import BubblewrapSession, session_unavailable
from cmx_core.sandbox.verdict import Ending, decide
from cmx_core.sandbox.workfs import Dropped, over_keep

PY = "/usr/bin/python3"
MIB = 1 << 20


@pytest.fixture(scope="module")
def box() -> BubblewrapSandbox:
    sandbox = BubblewrapSandbox()
    problem = sandbox.available() or (None if Path(PY).exists() else f"{PY} is needed inside the sandbox")
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"bubblewrap sandbox required in CI: {problem}")
        pytest.skip(problem)
    return sandbox


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir(mode=0o755)
    return folder


def _spec(work: Path, code: str, **limits: int | float) -> SandboxSpec:
    return SandboxSpec(argv=[PY, "-c", code], work_dir=work, limits=Limits(**{"wall_s": 60.0, **limits}))  # type: ignore[arg-type]


SIX_FILES = """
for i in range(6):
    try:
        with open(f"f{i}", "wb") as out:
            out.write(b"x" * (60 << 20))
    except OSError as exc:
        print("caught", exc.errno, flush=True)
"""


def test_six_60_mib_files_under_a_256_mib_total_bound_are_a_disk_verdict(box: BubblewrapSandbox, work: Path) -> None:
    result = box.run(_spec(work, SIX_FILES, work_bytes=256 * MIB, memory_bytes=1 << 30, output_bytes=100 * MIB))
    assert result.verdict is Verdict.DISK_LIMIT and result.exit_code == 0, result
    assert "caught 28" in result.text()  # ENOSPC, caught by the program
    assert result.enforced_by["work_bytes"] == "tmpfs"
    sizes = {path.name: path.stat().st_size for path in work.iterdir()}
    assert sizes["f0"] == 60 * MIB and sum(sizes.values()) <= 256 * MIB  # what it wrote came back, bounded


def test_the_same_files_under_a_larger_bound_are_ok(box: BubblewrapSandbox, work: Path) -> None:
    result = box.run(_spec(work, SIX_FILES, work_bytes=512 * MIB, keep_bytes=512 * MIB, memory_bytes=1 << 30,
                           output_bytes=100 * MIB))
    assert result.ok and result.dropped == (), result
    assert sorted(path.stat().st_size for path in work.iterdir()) == [60 * MIB] * 6


LEAVES = """
import os
os.makedirs("logs"); os.makedirs("sub")
for name, size in (("small.txt", 1024), ("logs/run.log", 10240), ("mid.bin", 3 << 20), ("big.bin", 6 << 20),
                   ("sub/big2.bin", 6 << 20)):
    with open(name, "wb") as out:
        out.write(b"x" * size)
"""


def _kept_and_dropped(work: Path, result: SandboxResult) -> None:
    """What LEAVES left under an 8 MiB keep: the smallest files up to it came back, the two
    6 MiB files did not and are listed with their sizes; the given files are all kept."""
    assert result.ok, result
    assert result.dropped == (Dropped("big.bin", 6 * MIB), Dropped("sub/big2.bin", 6 * MIB)), result
    assert not (work / "big.bin").exists() and not (work / "sub" / "big2.bin").exists()
    assert (work / "sub").is_dir() and (work / "logs" / "run.log").stat().st_size == 10240
    assert (work / "mid.bin").stat().st_size == 3 * MIB and (work / "small.txt").stat().st_size == 1024
    assert (work / "input.bin").stat().st_size == 9 * MIB  # more than the keep, but the host's own, unchanged


def test_what_comes_back_is_capped_and_the_rest_listed(box: BubblewrapSandbox, work: Path) -> None:
    """#54 item 3: the host copies back at most keep_bytes of what a program left (smallest
    first), so its work after the run (redaction, digests, bundles) is bounded by that."""
    (work / "input.bin").write_bytes(b"i" * (9 * MIB))
    result = box.run(_spec(work, LEAVES, work_bytes=64 * MIB, keep_bytes=8 * MIB))
    _kept_and_dropped(work, result)


def test_a_session_run_caps_what_comes_back_too(work: Path, require: Callable[[str | None, str], None]) -> None:
    require(session_unavailable(), "sandbox sessions")
    (work / "case").mkdir(mode=0o755)
    (work / "case" / "input.bin").write_bytes(b"i" * (9 * MIB))
    with BubblewrapSession(work, {}) as session:
        result = session.run(_spec(work / "case", LEAVES, work_bytes=64 * MIB, keep_bytes=8 * MIB))
    _kept_and_dropped(work / "case", result)


def test_keep_takes_the_smallest_first_then_by_path() -> None:
    files = [("a", 5), ("c", 3), ("b", 3), ("d", 1)]
    assert over_keep(files, 7) == [Dropped("a", 5)]  # d, b, c: 7
    assert over_keep(files, 6) == [Dropped("a", 5), Dropped("c", 3)]  # d, b: 4; c of the same size as b goes
    assert over_keep(files, 0) == [Dropped("a", 5), Dropped("b", 3), Dropped("c", 3), Dropped("d", 1)]


def test_the_work_dir_goes_in_and_comes_back(box: BubblewrapSandbox, work: Path, tmp_path: Path) -> None:
    (work / "given.txt").write_text("given")
    (work / "gone.txt").write_text("to be removed")
    (work / "sub").mkdir()
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    code = ("import os\nprint(open('given.txt').read())\nos.remove('gone.txt')\n"
            "open('sub/made.txt', 'w').write('made')\nos.mkfifo('pipe')\n"
            f"os.symlink({str(secret)!r}, 'link')\n")
    result = box.run(_spec(work, code, work_bytes=16 * MIB))
    assert result.ok and result.text() == "given\n", result
    assert sorted(path.name for path in work.iterdir()) == ["given.txt", "link", "sub"]  # no FIFO, no gone.txt
    assert (work / "sub" / "made.txt").read_text() == "made"
    assert (work / "link").is_symlink() and os.readlink(work / "link") == str(secret)  # a link, not the secret
    assert secret.read_text() == "host secret"


def test_without_a_bound_the_work_dir_is_the_host_directory(box: BubblewrapSandbox, work: Path) -> None:
    result = box.run(_spec(work, "open('x', 'w').write('y')", work_bytes=None))  # type: ignore[arg-type]
    assert result.ok and "work_bytes" not in result.enforced_by, result
    assert (work / "x").read_text() == "y"


def test_a_work_dir_already_past_the_bound_is_a_usage_error(box: BubblewrapSandbox, work: Path) -> None:
    (work / "big").write_bytes(b"x" * (2 * MIB))
    with pytest.raises(UsageError, match=r"holds 2097152 bytes, more than limits.work_bytes \(1048576\)"):
        box.run(_spec(work, "pass", work_bytes=MIB))


CATCH_EAGAIN = """
import os, time
made = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        made += 1
except OSError as exc:
    print("caught", exc.errno, "after", made, flush=True)
"""


def test_a_caught_eagain_from_fork_is_a_process_verdict(box: BubblewrapSandbox, work: Path) -> None:
    result = box.run(_spec(work, CATCH_EAGAIN, processes=8))
    if result.enforced_by.get("processes") not in ("cgroup", "cgroup-v2"):
        # RLIMIT_NPROC leaves no trace of a refused fork outside the program: no verdict to test
        if os.environ.get("CI"):
            pytest.fail(f"a pids cgroup is required in CI for this test (got {result.enforced_by})")
        pytest.skip(f"no pids cgroup for this user ({result.enforced_by.get('processes')})")
    assert result.verdict is Verdict.PROCESS_LIMIT and result.exit_code == 0, result
    assert "caught 11" in result.text() and "refused" in result.reason


CATCH_EFBIG = """
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGXFSZ})  # blocked, not ignored: the filter cannot see a mask
try:
    open("big", "wb").write(b"x" * (2 << 20))
except OSError as exc:
    print("caught", exc.errno, flush=True)
"""


def test_a_caught_efbig_with_sigxfsz_blocked_is_an_output_verdict(box: BubblewrapSandbox, work: Path) -> None:
    result = box.run(_spec(work, CATCH_EFBIG, output_bytes=MIB))
    assert result.verdict is Verdict.OUTPUT_LIMIT and result.exit_code == 0, result
    assert "caught 27" in result.text() and (work / "big").stat().st_size == MIB


def test_the_caught_limits_as_a_pure_function() -> None:
    limits = Limits(processes=8, work_bytes=256 * MIB)
    assert decide(Ending(stop="exited", status=0), limits)[0] is Verdict.OK
    assert decide(Ending(stop="exited", status=0, forks_refused=3), limits)[0] is Verdict.PROCESS_LIMIT
    assert decide(Ending(stop="exited", status=1 << 8, work_full=True), limits)[:2] == (Verdict.DISK_LIMIT, 1)
    assert decide(Ending(stop="exited", status=0, big_file=True), limits)[0] is Verdict.OUTPUT_LIMIT
    # a limit that stopped the run still names itself first: a fork bomb killed at the wall limit
    assert decide(Ending(stop="wall", status=9, forks_refused=100), limits)[0] is Verdict.TIME_LIMIT
    assert decide(Ending(stop="exited", status=(128 + 9) << 8, forks_refused=1), limits)[0] is Verdict.KILLED


def test_in_a_session_each_run_counts_its_own_refused_forks(box: BubblewrapSandbox, work: Path) -> None:
    why = session_unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"sandbox sessions required in CI: {why}")
        pytest.skip(why)
    with BubblewrapSession(work) as session:
        caught = session.run(_spec(work, CATCH_EAGAIN, processes=8))
        after = session.run(_spec(work, "print('fine')", processes=8))
        big = session.run(_spec(work, CATCH_EFBIG, output_bytes=MIB))
    assert caught.verdict is Verdict.PROCESS_LIMIT and caught.exit_code == 0, caught
    assert after.ok, after  # the session's pids.events count before the run is the base
    assert big.verdict is Verdict.OUTPUT_LIMIT and big.exit_code == 0, big


def test_a_file_at_the_bound_from_before_the_run_is_not_the_runs(box: BubblewrapSandbox, work: Path) -> None:
    (work / "given.bin").write_bytes(b"x" * MIB)  # there before: its mtime is older than the run
    os.utime(work / "given.bin", (1_000_000_000, 1_000_000_000))
    result = box.run(_spec(work, "print(len(open('given.bin', 'rb').read()))", output_bytes=MIB))
    assert result.ok and result.text() == f"{MIB}\n", result


def test_an_input_mounted_in_the_work_dir_is_never_the_programs(box: BubblewrapSandbox, work: Path,
                                                               tmp_path: Path) -> None:
    """An input bound under the work path is neither counted against the keep nor listed as
    dropped, however large: it is not what the program left."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "big.csv").write_bytes(b"d" * (3 * MIB))
    spec = SandboxSpec(argv=[PY, "-c", "open('out.txt', 'w').write(str(len(open('inputs/big.csv').read())))"],
                       work_dir=work, ro_binds={str(data): "/work/inputs"},
                       limits=Limits(wall_s=60.0, work_bytes=16 * MIB, keep_bytes=MIB))
    result = box.run(spec)
    assert result.ok and result.dropped == (), result
    assert (work / "out.txt").read_text() == str(3 * MIB) and not (work / "inputs" / "big.csv").exists()
