"""Hide a session's own processes from the programs it runs: its ``/proc`` remounted ``hidepid=invisible``.

A sandbox session's runner (``inner.py``) is root with a few capabilities, and bubblewrap's
init is root: without this, every program of the session sees both in ``/proc`` (the runner as
PID 2, its command line and its state). The programs run as another user without
capabilities, so they cannot signal or trace them either way; hidden, they cannot even read
what they are (issue 54 item 4). ``/proc`` of the sandbox's PID namespace is its own
instance (bubblewrap mounts it), so Linux (5.8 or later) takes the option for that instance
alone: the host's ``/proc`` is untouched. A program still sees its own processes, and the
processes of its user (a reactive tester and the solution it starts).

The remount is made from the host, as root, in a forked child that enters the sandbox's
mount namespace (``setns``), so nothing of the sandbox's own root (a judge image's, say) is
needed for it.
"""

from __future__ import annotations

import ctypes
import os

_LIBC = ctypes.CDLL(None, use_errno=True)
_SETNS, _MOUNT = _LIBC.setns, _LIBC.mount
"""Looked up here, before any fork: the forked child calls them and nothing else."""
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x2, 0x4, 0x8, 0x20
PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC
"""What bubblewrap mounts ``/proc`` with; a remount must name them again or it clears them."""


def hide_processes(pid: int) -> bool:
    """Remount ``/proc`` in the mount namespace of ``pid`` with ``hidepid=invisible``; whether it took."""
    try:
        namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover - the forked child: two calls, then _exit
            code = 1
            try:
                if (_SETNS(namespace, CLONE_NEWNS) == 0
                        and _MOUNT(b"proc", b"/proc", b"proc", MS_REMOUNT | PROC_FLAGS, b"hidepid=invisible") == 0):
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        return os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(namespace)


__all__ = ["hide_processes"]
