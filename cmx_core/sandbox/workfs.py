"""The work dir's total-size bound (``Limits.work_bytes``): a tmpfs of that size inside the sandbox.

RLIMIT_FSIZE bounds each file; nothing on a host directory bounds their sum without a quota
or a file system of its own, which a non-root user cannot make. bubblewrap can
(``--size N --tmpfs``, in the sandbox's mount namespace, root or not), so with a bound the
work path is such a tmpfs instead of a bind of the host's work dir, and this module moves the
files across, from outside, while the sandbox process waits on ``--block-fd``:

* :meth:`WorkFs.fill`: open the tmpfs through ``/proc/PID/root`` (the directory descriptor
  keeps the file system alive after the sandbox is gone) and copy the host's work dir in,
  owned by the sandbox user; an entry at a path where an input is mounted is left out (the
  input hides it, as the bind would have);
* :meth:`WorkFs.full`: the file system has no free block: some write met ENOSPC, even where
  the program caught the error (checked each tick of the parent's loop and at the end);
* :meth:`WorkFs.bring_back`: once the run is over, the host's work dir becomes what the
  program left: what was copied in is removed, the tmpfs's regular files, directories and
  symbolic links (never followed) are copied back; FIFOs, sockets and devices are not. At most
  ``keep`` bytes of regular files come back, the smallest first (a program's submission and
  logs before its bulk); the rest are never read by the host, only listed (:class:`Dropped`),
  so what the host spends on a run's leftovers (copying, redaction, digests, bundles) is bounded
  by ``keep``, not by what the program wrote.

The bytes the program writes there are memory (tmpfs), charged to the run's memory cgroup
where it has one, as its ``/tmp`` is.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError

PAGE = os.sysconf("SC_PAGE_SIZE")
OPEN_TIMEOUT_S = 10.0
"""How long bubblewrap may take to mount the work dir's tmpfs after it reported the sandbox's PID."""


@dataclass(frozen=True)
class Dropped:
    """A file the program left that was not brought back (over ``Limits.keep_bytes``)."""

    path: str
    """Relative to the work dir."""
    bytes: int


def leftovers(root: str, skip: frozenset[str] = frozenset()) -> dict[str, tuple[int, int]]:
    """Each regular file under ``root`` (links not followed), relative to it: (size, mtime in ns);
    not under the top-level names ``skip`` (where an input is mounted: never the program's)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        if folder == root:
            dirs[:] = [name for name in dirs if name not in skip]
        for name in files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                found[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
    return found


def tree_bytes(root: Path) -> int:
    """The sum of the sizes of the regular files under ``root`` (links not followed)."""
    return sum(size for size, _ in leftovers(str(root)).values())


def over_keep(files: list[tuple[str, int]], keep: int) -> list[Dropped]:
    """The files not kept when at most ``keep`` bytes are, the smallest first (then by path)."""
    kept = 0
    dropped: list[Dropped] = []
    for path, size in sorted(files, key=lambda item: (item[1], item[0])):
        if kept + size <= keep and not dropped:
            kept += size
        else:
            dropped.append(Dropped(path, size))
    return sorted(dropped, key=lambda item: item.path)


def check_fits(work: Path, bound: int) -> None:
    """A UsageError when the work dir already holds more than the bound, before anything starts."""
    held = tree_bytes(work)
    if held > bound:
        raise UsageError(f"sandbox work_dir {work} holds {held} bytes, more than limits.work_bytes ({bound}); "
                         "raise work_bytes, or set it to None for no total bound")


def _special(folder: str, names: list[str]) -> list[str]:
    """The names under ``folder`` that are neither a regular file, a directory nor a link."""
    left_out = []
    for name in names:
        mode = os.lstat(os.path.join(folder, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            left_out.append(name)
    return left_out


class WorkFs:
    """The tmpfs at the work path of one run, and its host work dir."""

    def __init__(self, host: Path, mounted: tuple[str, ...], bound: int, keep: int | None = None) -> None:
        self.host = host
        self.bound = bound
        self.keep = keep
        """The most bytes of the program's files brought back (None: all)."""
        self.given: dict[str, tuple[int, int]] = {}
        """The files copied in, as :func:`leftovers` gives them: one still so is the host's own, always kept."""
        self.dropped: tuple[Dropped, ...] = ()
        self.mounted = frozenset(mounted)
        """Paths relative to the work path where bwrap mounted an input (or made a directory leading to one)."""
        self.copied: list[str] = []
        self.fd: int | None = None
        self.was_full = False

    @property
    def at(self) -> str:
        assert self.fd is not None
        return f"/proc/self/fd/{self.fd}"

    def fill(self, pid: int, work_path: str, uid: int | None) -> None:
        """Copy the host's work dir into the waiting sandbox's tmpfs; ``uid`` (as root): give it to that user."""
        self.fd = self._open(pid, work_path)
        self._copy_in(f"/proc/{pid}/root{work_path}", uid)

    def _copy_in(self, where: str, uid: int | None) -> None:
        """Fill the open tmpfs (``self.fd``, named ``where`` in messages) from the host's work dir."""
        assert self.fd is not None
        # SAFETY GUARD added by the merging engineer: at 12:56 a run of this code opened the HOST's
        # /work (the pid's root was the host's), copied files into it and chowned all of /work to
        # nobody. Refuse anything but an empty tmpfs of the sandbox's own. Keep a guard like this.
        here = os.fstat(self.fd)
        if (set(os.listdir(self.at)) - self.mounted or here.st_dev == os.stat("/").st_dev
                or here.st_dev == os.stat(self.host).st_dev):
            os.close(self.fd)
            self.fd = None
            raise RuntimeError(f"{where} is not the sandbox's own empty tmpfs; not filling it")
        for name in sorted(os.listdir(self.host)):
            if name in self.mounted:
                continue
            source, target = self.host / name, f"{self.at}/{name}"
            if source.is_dir() and not source.is_symlink():
                shutil.copytree(source, target, symlinks=True, ignore=_special)
            elif source.is_symlink() or source.is_file():
                shutil.copy2(source, target, follow_symlinks=False)
            else:
                continue
            self.copied.append(name)
        if self.keep is not None:
            self.given = leftovers(self.at, self.mounted)
        host = os.stat(self.host)
        os.fchmod(self.fd, stat.S_IMODE(host.st_mode))
        if uid is not None:
            os.fchown(self.fd, uid, host.st_gid)
            for name in self.copied:  # not the mount points: an input is not the user's
                top = f"{self.at}/{name}"
                os.lchown(top, uid, host.st_gid)
                for folder, dirs, files in os.walk(top):
                    for entry in dirs + files:
                        os.lchown(os.path.join(folder, entry), uid, host.st_gid)

    def _open(self, pid: int, work_path: str) -> int:
        """The sandbox's own tmpfs at ``work_path``, once bwrap has mounted it. bubblewrap
        reports the sandbox's PID before its set-up, while ``/proc/PID/root`` may still be the
        host's root: only a file system of exactly the bound's size, on another device than
        the host's root and work dir, holding nothing but the mount points bwrap made, is
        taken; never a host directory."""
        want = math.ceil(self.bound / PAGE) * PAGE
        host_devs = {os.stat("/").st_dev, os.stat(self.host).st_dev}
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while True:
            try:
                fd = os.open(f"/proc/{pid}/root{work_path}", os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                fd = -1
            if fd >= 0:
                info = os.fstatvfs(fd)
                if (info.f_blocks * info.f_frsize == want and os.fstat(fd).st_dev not in host_devs
                        and set(os.listdir(fd)) <= self.mounted):
                    return fd
                os.close(fd)
            if time.monotonic() > deadline:
                raise OSError(f"bwrap did not mount the {self.bound} byte tmpfs at {work_path} "
                              f"within {OPEN_TIMEOUT_S:g} s")
            time.sleep(0.002)

    def full(self) -> bool:
        """Whether the tmpfs is full now (remembered: a later ``full()`` stays True)."""
        if self.fd is not None and not self.was_full:
            self.was_full = os.fstatvfs(self.fd).f_bfree == 0
        return self.was_full

    def bring_back(self) -> None:
        """Make the host's work dir what the run left in the tmpfs, then let the tmpfs go."""
        if self.fd is None:
            return
        try:
            self.full()
            for name in self.copied:
                path = self.host / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
            self.dropped = tuple(self._over_keep()) if self.keep is not None else ()
            skip = frozenset(item.path for item in self.dropped)

            def ignore(folder: str, names: list[str]) -> list[str]:
                inside = os.path.relpath(folder, self.at)
                return [*_special(folder, names),
                        *(n for n in names if os.path.normpath(os.path.join(inside, n)) in skip)]

            for name in sorted(os.listdir(self.at)):
                source, target = f"{self.at}/{name}", self.host / name
                mode = os.lstat(source).st_mode
                if name in self.mounted and stat.S_ISDIR(mode):
                    continue  # a mount point bwrap made; on the host an input's path stays as it was
                if stat.S_ISDIR(mode):
                    shutil.copytree(source, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
                elif name in skip:
                    continue
                elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                    if target.is_dir() and not target.is_symlink():
                        shutil.rmtree(target)
                    shutil.copy2(source, target, follow_symlinks=False)
        finally:
            self.close()

    def _over_keep(self) -> list[Dropped]:
        """The program's files over the keep (a file still as it was copied in is not the program's)."""
        assert self.keep is not None
        made = [(path, size) for path, (size, stamp) in leftovers(self.at, self.mounted).items()
                if self.given.get(path) != (size, stamp)]
        return over_keep(made, self.keep)

    def close(self) -> None:
        """Let the tmpfs go (a run that ended before :meth:`bring_back`); idempotent."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def mounted_under(work_path: str, targets: list[str]) -> tuple[str, ...]:
    """The first path component under ``work_path`` of each mount target inside it."""
    base = os.path.normpath(work_path).rstrip("/") + "/"
    return tuple(sorted({os.path.normpath(t)[len(base):].split("/")[0] for t in targets
                         if os.path.normpath(t).startswith(base)}))


__all__ = ["Dropped", "WorkFs", "check_fits", "leftovers", "mounted_under", "over_keep", "tree_bytes"]
