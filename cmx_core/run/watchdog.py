"""No orphans: what a step started dies with cmx, even when cmx is killed with SIGKILL.

Every process a shell step starts carries ``CMX_RUN_TOKEN=<token of this cmx process>`` in
its environment (inherited by everything it starts in turn) and leads its own process
group. The step's leader gets SIGKILL when cmx dies (``PR_SET_PDEATHSIG``, set by
``setpriv`` just before the exec), and cmx is a child subreaper (``PR_SET_CHILD_SUBREAPER``):
a step's descendants whose parent exits are re-parented to cmx while it lives, not to init.

For the descendants a parent-death signal cannot reach (the leader's children), the first
step of a cmx process starts this module as a watchdog: a separate process in its own
session (so a Ctrl-C or a kill of cmx's group does not reach it) that reads cmx's pipe.
cmx writes ``+PGID`` and ``-PGID`` as step process groups start and end, and ``+/PATH`` and
``-/PATH`` for the step's cgroup (:mod:`cmx_core.sandbox.step_group`, where one can be made);
when the pipe reaches end-of-file (cmx is gone, however it ended) the watchdog kills every
process in each cgroup still listed (nothing leaves a cgroup by ``setsid`` or ``env -i``),
each process group still listed and every process whose environment carries the token
(descendants that left the group with ``setsid``), then exits. Should the watchdog itself be
killed too, the next cmx start kills what interrupted runs' records name (:func:`kill_marked`
from :func:`cmx_core.run.inflight.reap`) and what is left in the cgroups of dead cmx
processes (:func:`cmx_core.sandbox.step_group.sweep_left_groups`).

Run as ``python -S -c <this file's text> TOKEN``: the standard library only, nothing else
imported, so it starts in a few milliseconds.
"""

from __future__ import annotations

import os
import signal
import sys
import time

TOKEN_ENV = "CMX_RUN_TOKEN"


def kill_marked(token: str) -> list[int]:
    """SIGKILL every process (of this user) whose environment has ``CMX_RUN_TOKEN=token``;
    the PIDs it killed."""
    needle = f"{TOKEN_ENV}={token}".encode()
    me = os.getpid()
    killed: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return killed
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                marked = needle in handle.read().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if marked:
            try:
                os.kill(int(name), signal.SIGKILL)
                killed.append(int(name))
            except OSError:
                pass
    return killed


def watch(token: str) -> None:
    """Read ``+PGID``/``-PGID`` lines from stdin until end-of-file, then kill what is left."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    cgroups: set[str] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            sign, rest = line[:1], line[1:]
            if rest[:1] == b"/":
                (cgroups.add if sign == b"+" else cgroups.discard)(rest.decode())
            elif rest.isdigit():
                (groups.add if sign == b"+" else groups.discard)(int(rest))
    for path in cgroups:
        kill_cgroup(path)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    kill_marked(token)


def kill_cgroup(path: str, rounds: int = 200) -> None:
    """SIGKILL every process in the cgroup at ``path`` and below until it is empty (at most
    ``rounds`` passes of 5 ms: a process in uninterruptible sleep dies when it wakes)."""
    for _ in range(rounds):
        left = []
        for folder, _dirs, files in os.walk(path):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(folder, "cgroup.procs")) as handle:
                        left += [int(pid) for pid in handle.read().split()]
                except (OSError, ValueError):
                    continue
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


if __name__ == "__main__":
    watch(sys.argv[1])
