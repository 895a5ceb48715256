"""Read a child's stdout and stderr with a byte cap while watching its exit and a deadline.

One ``selectors`` loop over the two pipes and a pidfd of the child: no thread per stream,
and no polling of the child (a check callback runs only every ``tick_s`` while it runs).
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field

LINGER_S = 1.0
"""How long the pipes may stay open after the child exited (a writer outside the sandbox)."""


@dataclass
class Captured:
    """What the loop read, and why it stopped: ``exited``, ``wall``, ``output`` or a check's word."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    stop: str = "exited"


class _Reader:
    def __init__(self, out_fd: int, err_fd: int, got: Captured, cap: int) -> None:
        self.buffers = {out_fd: got.stdout, err_fd: got.stderr}
        self.got = got
        self.cap = cap

    def take(self, fd: int) -> bool | None:
        """Read once: False at end of file, True when the cap was passed, None otherwise."""
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return None
        if not chunk:
            return False
        room = max(self.cap - len(self.got.stdout) - len(self.got.stderr), 0)
        self.buffers[fd].extend(chunk[:room])
        if len(chunk) > room:
            self.got.truncated = True
            return True
        return None


@dataclass(frozen=True)
class Child:
    """What :func:`pump` watches: a descriptor that turns readable when the child exits (a
    pidfd, or a session's control socket) and the read ends of its stdout and stderr."""

    exit_fd: int
    out_fd: int
    err_fd: int


def pump(child: Child, *, cap: int, deadline: float, check: Callable[[], str | None] | None = None,
         tick_s: float = 0.1, on_exit: Callable[[], object] | None = None) -> Captured:
    """Read until the child exits and its pipes close, the deadline passes, the output
    passes ``cap`` bytes, or ``check()`` returns a reason to stop. ``on_exit`` runs once when
    the child has exited (a session kills what it left behind, so its pipes close)."""
    pid_fd, out_fd, err_fd = child.exit_fd, child.out_fd, child.err_fd
    got = Captured()
    reader = _Reader(out_fd, err_fd, got, cap)
    sel = selectors.DefaultSelector()
    for fd in (out_fd, err_fd):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    sel.register(pid_fd, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while exited_at is None or sel.get_map():
            now = time.monotonic()
            if exited_at is None:
                if now >= deadline:
                    got.stop = "wall"
                    return got
                timeout = min(deadline - now, tick_s) if check else deadline - now
            else:
                if now - exited_at > LINGER_S:
                    return got
                timeout = LINGER_S
            for key, _ in sel.select(max(timeout, 0.0)):
                fd = int(key.fd)
                if fd == pid_fd:
                    sel.unregister(pid_fd)
                    if on_exit is not None:
                        on_exit()
                    exited_at = time.monotonic()
                    continue
                state = reader.take(fd)
                if state is False:
                    sel.unregister(fd)
                elif state:
                    got.stop = "output"
                    return got
            if check is not None and exited_at is None:
                reason = check()
                if reason:
                    got.stop = reason
                    return got
        return got
    finally:
        sel.close()


def drain(out_fd: int, err_fd: int, got: Captured, cap: int, timeout_s: float = LINGER_S) -> None:
    """After the child was killed: keep what is still in the pipes, within the cap."""
    end = time.monotonic() + timeout_s
    reader = _Reader(out_fd, err_fd, got, cap)
    with selectors.DefaultSelector() as sel:
        for fd in (out_fd, err_fd):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map() and time.monotonic() < end:
            for key, _ in sel.select(max(end - time.monotonic(), 0.0)):
                state = reader.take(int(key.fd))
                if state is False:
                    sel.unregister(key.fd)
                elif state:
                    return
