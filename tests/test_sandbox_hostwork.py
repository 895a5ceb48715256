"""The work dir's bounded tmpfs mounted on the host for a sandbox an engine starts
(``cmx_core/sandbox/hostwork.py``, the docker backend's), without an engine: filled from the
work dir, detached from the host's mount table while still open, found full after a write
past its bound even once that write's file is gone, brought back within the keep cap, and
gone when closed."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cmx_core.api.sandboxing import HostWorkFs, host_work_unavailable
from cmx_core.errors import UsageError
from cmx_core.sandbox.hostwork import mount_source
from cmx_core.sandbox.workfs import Dropped

MIB = 1 << 20


def _mounted(point: Path) -> bool:
    return any(line.split()[1] == str(point) for line in Path("/proc/self/mounts").read_text().splitlines())


def _ours_mounted() -> bool:
    """A tmpfs of this process's still in the mount table (other processes mount their own meanwhile)."""
    return any(line.split()[0] == mount_source() for line in Path("/proc/self/mounts").read_text().splitlines())


def test_a_host_tmpfs_is_filled_detached_bounded_and_brought_back(tmp_path: Path,
                                                                 require: Callable[[str | None, str], None]) -> None:
    require(host_work_unavailable(), "a host tmpfs (root)")
    work = tmp_path / "work"
    work.mkdir()
    (work / "given.txt").write_text("given")
    workfs = HostWorkFs(work, 4 * MIB, keep=1 * MIB)
    point = workfs.mount(uid=None)
    try:
        assert _mounted(point) and (point / "given.txt").read_text() == "given"
        info = os.statvfs(point)
        assert info.f_blocks * info.f_frsize == 4 * MIB
        workfs.detach()  # as once the container holds it
        assert not _mounted(point) and not point.exists()
        assert not _ours_mounted()
        inside = Path(workfs.at)
        (inside / "small.bin").write_bytes(b"s" * (512 << 10))
        with pytest.raises(OSError) as caught, open(inside / "filler", "wb") as out:
            out.write(b"x" * (8 * MIB))
        assert caught.value.errno == errno.ENOSPC
        assert workfs.full()
        (inside / "filler").unlink()
        assert workfs.full()  # remembered: freeing it does not undo the limit hit
        (inside / "big.bin").write_bytes(b"b" * (2 * MIB))
        workfs.bring_back()
    finally:
        workfs.close()
    assert sorted(p.name for p in work.iterdir()) == ["given.txt", "small.bin"]
    assert workfs.dropped == (Dropped("big.bin", 2 * MIB),)


def test_a_work_dir_past_the_bound_is_refused_and_nothing_stays_mounted(
        tmp_path: Path, require: Callable[[str | None, str], None]) -> None:
    require(host_work_unavailable(), "a host tmpfs (root)")
    work = tmp_path / "work"
    work.mkdir()
    (work / "big").write_bytes(b"x" * (2 * MIB))
    workfs = HostWorkFs(work, MIB, keep=None)
    with pytest.raises(UsageError, match=r"holds 2097152 bytes, more than limits.work_bytes \(1048576\)"):
        workfs.mount(uid=None)
    assert workfs.point is None and workfs.fd is None
    assert not _ours_mounted()


HOLDER = """
import sys, time
from pathlib import Path
from cmx_core.api.sandboxing import HostWorkFs
workfs = HostWorkFs(Path(sys.argv[1]), 1 << 20, keep=None)
point = workfs.mount(uid=None)
workfs.detach()  # as once the container holds it
print(point, flush=True)
time.sleep(300)
"""


def test_a_process_killed_after_the_detach_leaves_no_mount(tmp_path: Path,
                                                           require: Callable[[str | None, str], None]) -> None:
    """The docs' claim, with the kill made from outside: a holder of the detached tmpfs killed
    by PID (SIGKILL, no clean-up of its own) leaves neither a mount nor its mount point."""
    require(host_work_unavailable(), "a host tmpfs (root)")
    work = tmp_path / "work"
    work.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(work)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        point = Path(holder.stdout.readline().strip())
        source = f"cmx-work-{holder.pid}"
        assert point.name.startswith("cmx-work-") and not point.exists()
        assert source not in [line.split()[0] for line in Path("/proc/self/mounts").read_text().splitlines()]
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert source not in [line.split()[0] for line in Path("/proc/self/mounts").read_text().splitlines()]
