"""What a sandboxed run asks for: the command, its files, its environment and its limits.

A spec is plain data; :func:`check_spec` turns what would make a backend fail on its input
into a one-line :class:`~cmx_core.errors.UsageError` naming the key and the fix, before
anything starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from cmx_core.errors import UsageError

NOBODY = 65534
"""The uid and gid of ``nobody`` on Debian and most Linux distributions."""

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

WORK_BYTES = 1 << 30
"""The default bound on the work dir's total size (as the sandbox's ``/tmp`` without a memory limit)."""

KEEP_BYTES = 256 << 20
"""The default cap on what of the work dir is brought back to the host after a run."""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one run; ``None`` means "not limited" (wall time is always bounded).

    ``output_bytes`` caps the captured stdout plus stderr and is also the largest file the
    program may write (``RLIMIT_FSIZE``). ``cpus`` is how many CPUs the run may use (taken
    in turn from those this process may use, see ``cpus.py``), ``cpu_s`` the CPU seconds of
    the whole run. ``work_bytes`` bounds the total size of the work dir (what was there plus
    what the program writes): it is a tmpfs of that size inside the sandbox, copied back to
    the host's work dir when the run ends (None: the host directory itself, unbounded).
    ``keep_bytes`` caps what of the program's files comes back, the smallest first (a file
    still as it was copied in is the host's own and always comes back): the rest is listed in
    ``SandboxResult.dropped`` with its size, never read by the host (None: everything; no cap
    without ``work_bytes``).
    """

    wall_s: float = 60.0
    cpu_s: float | None = None
    memory_bytes: int | None = 2 << 30
    processes: int | None = 64
    output_bytes: int = 16 << 20
    cpus: int | None = None
    work_bytes: int | None = WORK_BYTES
    keep_bytes: int | None = KEEP_BYTES


@dataclass(frozen=True)
class SandboxUser:
    """The non-root identity the program runs as (when cmx itself runs as root)."""

    uid: int = NOBODY
    gid: int = NOBODY


@dataclass(frozen=True)
class SandboxSpec:
    """One command to run confined.

    ``argv`` is a list (never a shell string); ``argv[0]`` is a path inside the sandbox or a
    name looked up on the spec's ``PATH``. ``work_dir`` is the host directory the program may
    write, mounted at ``work_path`` and used as the current directory; nothing else is
    writable except a private ``/tmp``. ``ro_binds`` maps host paths (the inputs) to paths
    inside the sandbox, read-only. ``env`` is the whole environment: nothing of the caller's
    is inherited (``PATH``, ``HOME``, ``TMPDIR`` and ``LANG`` get defaults when absent).
    ``network`` must stay ``False`` for untrusted code; no backend here offers one.
    ``shm_bytes`` is the size of ``/dev/shm`` (None: the backend's default). ``gpus`` is the
    GPUs the program may use: 0 none, -1 all, N that many (a container's device request;
    bubblewrap passes ``/dev/nvidia*`` through where the machine has them, refuses otherwise).
    ``root_fs`` is a host directory holding a whole root filesystem (a container image's,
    exported): its ``/usr``, merged-usr links and loader files replace the host's, so the
    program runs that system's compilers and libraries (None: the host's own ``/usr``).
    """

    argv: tuple[str, ...] | list[str]
    work_dir: str | os.PathLike[str]
    work_path: str = "/work"
    ro_binds: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    user: SandboxUser = field(default_factory=SandboxUser)
    network: bool = False
    stdin: bytes = b""
    shm_bytes: int | None = None
    gpus: int = 0
    root_fs: str | None = None

    def full_env(self) -> dict[str, str]:
        """The environment the program sees: ``env`` over the minimal defaults."""
        base = {"PATH": DEFAULT_PATH, "HOME": self.work_path, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        return {**base, **dict(self.env)}


def _positive(name: str, value: object, *, integer: bool, optional: bool, prefix: str = "sandbox limits.") -> None:
    if value is None and optional:
        return
    ok = isinstance(value, int) and not isinstance(value, bool) if integer else (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
    if not ok or value <= 0:  # type: ignore[operator]
        kind = "a positive integer" if integer else "a positive number"
        raise UsageError(f"{prefix}{name} must be {kind}{' or None' if optional else ''}, got {value!r}")


def check_limits(limits: Limits) -> None:
    """Raise a UsageError for a limit that is not a positive number."""
    if not isinstance(limits, Limits):
        raise UsageError(f"sandbox limits must be a Limits(...), got {type(limits).__name__}")
    _positive("wall_s", limits.wall_s, integer=False, optional=False)
    _positive("cpu_s", limits.cpu_s, integer=False, optional=True)
    _positive("memory_bytes", limits.memory_bytes, integer=True, optional=True)
    _positive("processes", limits.processes, integer=True, optional=True)
    _positive("output_bytes", limits.output_bytes, integer=True, optional=False)
    _positive("cpus", limits.cpus, integer=True, optional=True)
    _positive("work_bytes", limits.work_bytes, integer=True, optional=True)
    _positive("keep_bytes", limits.keep_bytes, integer=True, optional=True)


def _inside_path(key: str, value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or ".." in PurePosixPath(value).parts:
        raise UsageError(f"sandbox {key} must be an absolute path inside the sandbox without '..', got {value!r}")
    return os.path.normpath(value)


RESERVED = ("/proc", "/dev", "/tmp", "/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin")
"""Paths the sandbox builds itself; a work dir or an input may not be mounted over them."""


def check_spec(spec: SandboxSpec) -> None:
    """Raise a one-line UsageError for a spec no backend could run."""
    argv: object = spec.argv  # callers outside mypy's reach pass anything
    if not isinstance(argv, (list, tuple)):
        raise UsageError(f"sandbox argv must be a list of arguments, not {type(argv).__name__} {argv!r}")
    if not spec.argv:
        raise UsageError("sandbox argv is empty; give the program and its arguments as a list")
    for i, arg in enumerate(spec.argv):
        if not isinstance(arg, str) or "\0" in arg:
            raise UsageError(f"sandbox argv[{i}] must be a string without NUL bytes, got {arg!r}")
    if spec.network:
        raise UsageError("sandbox network=True is not offered: untrusted code runs without a network; drop the key")
    work = os.fspath(spec.work_dir)
    if not os.path.isabs(work) or not os.path.isdir(work):
        raise UsageError(f"sandbox work_dir {work!r} is not an existing directory; create it or give an absolute path")
    inside = _inside_path("work_path", spec.work_path)
    if inside == "/" or any(inside == r or inside.startswith(r + "/") for r in RESERVED):
        raise UsageError(f"sandbox work_path {inside!r} clashes with the sandbox's own /usr, /etc, /tmp...; "
                         "use a path like /work")
    for host, target in dict(spec.ro_binds).items():
        if not isinstance(host, str) or not os.path.isabs(host) or not os.path.exists(host):
            raise UsageError(f"sandbox ro_binds key {host!r} is not an existing absolute host path")
        where = _inside_path(f"ro_binds[{host!r}]", target)
        if where == "/" or where in RESERVED or where == inside:
            raise UsageError(f"sandbox ro_binds[{host!r}] = {target!r} would hide a path the sandbox needs; "
                             "mount inputs at a path of their own such as /data")
    for key, value in dict(spec.env).items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key or "\0" in key + value:
            raise UsageError(f"sandbox env entry {key!r}={value!r} must map a name (no '=') to a string")
    if not isinstance(spec.stdin, bytes):
        raise UsageError(f"sandbox stdin must be bytes, got {type(spec.stdin).__name__}")
    if not isinstance(spec.user, SandboxUser) or spec.user.uid <= 0 or spec.user.gid <= 0:
        raise UsageError(f"sandbox user must be a non-root SandboxUser(uid, gid), got {spec.user!r}")
    check_limits(spec.limits)
    _positive("shm_bytes", spec.shm_bytes, integer=True, optional=True, prefix="sandbox ")
    _check_root_fs(spec.root_fs)
    gpus: object = spec.gpus
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < -1:
        raise UsageError(f"sandbox gpus must be 0 (none), -1 (all) or a count of GPUs, got {gpus!r}")


def _check_root_fs(root_fs: object) -> None:
    if root_fs is None:
        return
    if not isinstance(root_fs, str) or not os.path.isabs(root_fs) or not os.path.isdir(os.path.join(root_fs, "usr")):
        raise UsageError(f"sandbox root_fs {root_fs!r} is not a root filesystem (an absolute directory holding usr/); "
                         "export an image's root there or drop the key")
