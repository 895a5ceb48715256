"""Mounts made from the host inside a running sandbox session's mount namespace (issue 54).

A session's mount namespace outlives its runs. Two things are changed in it from the host, as
root, by a helper that lives in that namespace for the session's length
(:class:`NamespaceMounts`): a ``python3 -I -S`` started once (no fork of this process, which
may hold threads and much memory), which loads what it needs, enters the namespace
(``setns``) and then makes one mount call per request read from its stdin. So nothing of the
sandbox's own root (a judge image's, say) is needed, each request costs a pipe round trip
instead of a fork, and nothing is left on the host: the mounts live and die with the
namespace, and the helper exits when its stdin closes (the session closing, or this process
dying).

* :meth:`NamespaceMounts.hide_processes`: ``/proc`` remounted ``hidepid=invisible``. The
  session's runner (``inner.py``) and bubblewrap's init are root; without this every program
  of the session sees both in ``/proc`` (the runner as PID 2, its command line and state).
  The programs run as another user without capabilities, so they could not signal or trace
  them either way; hidden, they cannot even read what they are. ``/proc`` of the sandbox's
  PID namespace is its own instance (bubblewrap mounts it), and Linux (5.8 or later) takes the
  option for that instance alone: the host's ``/proc`` is untouched. A program still sees its
  own processes and its user's (a reactive tester and the solution it starts).
* :meth:`NamespaceMounts.mount_tmpfs` / :meth:`NamespaceMounts.unmount`: a run's work dir as a
  tmpfs of the run's ``work_bytes``, for the run's length: the kernel stops the run's writes at
  the bound (ENOSPC), as it does for a single run's work dir (``workfs.py`` moves the files in
  and back).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import IO

HELPER = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
namespace = os.open(sys.argv[1], os.O_RDONLY | os.O_CLOEXEC)
if libc.setns(namespace, 0x00020000) != 0:  # CLONE_NEWNS
    sys.exit(3)
os.close(namespace)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    op, path, *rest = json.loads(line)
    if op == "mount":
        source, kind, flags, options = rest
        done = libc.mount(source.encode(), path.encode(), kind.encode(), flags, options.encode())
    else:
        done = libc.umount2(path.encode(), 2)  # MNT_DETACH
    print(json.dumps(0 if done == 0 else ctypes.get_errno()), flush=True)
"""
"""The helper: everything it needs is loaded before it enters the namespace, whose root may
hold no Python at all."""
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x2, 0x4, 0x8, 0x20
PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC
"""What bubblewrap mounts ``/proc`` with; a remount must name them again or it clears them."""
START_TIMEOUT_S = 30.0


class NamespaceMounts:
    """The helper in the mount namespace of ``pid``; ``close()`` ends it."""

    def __init__(self, pid: int) -> None:
        self.proc: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", HELPER, f"/proc/{pid}/ns/mnt"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd="/", env={})
        if self._line() != {"ready": True}:
            self.close()

    def _line(self) -> object:
        stream: IO[str] | None = self.proc.stdout if self.proc is not None else None
        if stream is None:
            return None
        line = stream.readline()
        return json.loads(line) if line else None

    def _ask(self, request: list[object]) -> bool:
        """Send one request; whether the mount call returned 0 (False once the helper is gone)."""
        if self.proc is None or self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:
            return False
        return self._line() == 0

    @property
    def ready(self) -> bool:
        return self.proc is not None

    def hide_processes(self) -> bool:
        """Remount ``/proc`` with ``hidepid=invisible``; whether it took."""
        return self._ask(["mount", "/proc", "proc", "proc", MS_REMOUNT | PROC_FLAGS, "hidepid=invisible"])

    def mount_tmpfs(self, path: str, size: int) -> bool:
        """Mount a tmpfs of ``size`` bytes, mode 0700, at ``path``; whether it took."""
        return self._ask(["mount", path, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0700"])

    def unmount(self, path: str) -> bool:
        """Detach the mount at ``path``; whether it took."""
        return self._ask(["umount", path])

    def close(self) -> None:
        """End the helper (its stdin closed, it exits; killed if it does not within the timeout)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


__all__ = ["NamespaceMounts"]
