"""Mounts made from the host inside a running sandbox's mount namespace (issue 54).

A sandbox session's mount namespace outlives its runs. Two things are changed in it from the
host, as root, each in a forked child that enters the namespace (``setns``) and makes one
system call, so nothing of the sandbox's own root (a judge image's, say) is needed and
nothing is left on the host: the mounts live and die with the namespace.

* :func:`hide_processes`: ``/proc`` remounted ``hidepid=invisible``. The session's runner
  (``inner.py``) and bubblewrap's init are root; without this every program of the session
  sees both in ``/proc`` (the runner as PID 2, its command line and state). The programs run
  as another user without capabilities, so they could not signal or trace them either way;
  hidden, they cannot even read what they are. ``/proc`` of the sandbox's PID namespace is
  its own instance (bubblewrap mounts it), and Linux (5.8 or later) takes the option for that
  instance alone: the host's ``/proc`` is untouched. A program still sees its own processes
  and its user's (a reactive tester and the solution it starts).
* :func:`mount_tmpfs` / :func:`unmount`: a run's work dir as a tmpfs of the run's
  ``work_bytes``, for the run's length: the kernel stops the run's writes at the bound (ENOSPC),
  as it does for a single run's work dir (``workfs.py`` moves the files in and back).
"""

from __future__ import annotations

import ctypes
import os

_LIBC = ctypes.CDLL(None, use_errno=True)
_SETNS, _MOUNT, _UMOUNT2 = _LIBC.setns, _LIBC.mount, _LIBC.umount2
"""Looked up here, before any fork: the forked child calls them and nothing else."""
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x2, 0x4, 0x8, 0x20
MNT_DETACH = 0x2
PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC
"""What bubblewrap mounts ``/proc`` with; a remount must name them again or it clears them."""


def _in_namespace(pid: int, call: tuple[object, ...]) -> bool:
    """Run ``call`` (a libc function and its arguments) in the mount namespace of ``pid``, in
    a forked child; whether it returned 0."""
    try:
        namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover - the forked child: two calls, then _exit
            code = 1
            try:
                function, *args = call
                if _SETNS(namespace, CLONE_NEWNS) == 0 and function(*args) == 0:  # type: ignore[operator]
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        return os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(namespace)


def hide_processes(pid: int) -> bool:
    """Remount ``/proc`` in the mount namespace of ``pid`` with ``hidepid=invisible``; whether it took."""
    return _in_namespace(pid, (_MOUNT, b"proc", b"/proc", b"proc", MS_REMOUNT | PROC_FLAGS, b"hidepid=invisible"))


def mount_tmpfs(pid: int, path: str, size: int) -> bool:
    """Mount a tmpfs of ``size`` bytes at ``path`` (inside the namespace of ``pid``); whether it took."""
    options = f"size={size},mode=0700".encode()
    return _in_namespace(pid, (_MOUNT, b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options))


def unmount(pid: int, path: str) -> bool:
    """Detach the mount at ``path`` (inside the namespace of ``pid``); whether it took."""
    return _in_namespace(pid, (_UMOUNT2, path.encode(), MNT_DETACH))


__all__ = ["hide_processes", "mount_tmpfs", "unmount"]
