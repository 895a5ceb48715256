"""The bubblewrap command line for a spec, and the host file behind a path inside it.

The sandbox's root is an empty tmpfs holding only: ``/usr`` read-only with the merged-usr
links (``/bin``, ``/lib``...), the few ``/etc`` files a program's loader and locale need, a
generated ``/etc/passwd`` and ``/etc/group``, a fresh ``/proc`` and minimal ``/dev``, a
private ``/tmp``, the work directory (read-write) and the inputs (read-only), each at the
path the spec names: an input may sit inside the private ``/tmp`` or inside the work dir's
mount (a venv under ``/home/<user>`` bound at its own path). Nothing else of ``/root``,
``/home``, the cmx cache or the host's ``/tmp`` exists inside. With a spec's ``root_fs`` (an
exported image root) its ``usr``, top-level links and ``etc`` files take the host's place.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError
from cmx_core.sandbox.spec import SandboxSpec

TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Top-level directories that merged-usr systems make links into ``/usr``."""

ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf")
"""The ``/etc`` pieces a dynamically linked program and a Python need (no ``hosts``,
``resolv.conf`` or certificates: there is no network to use them)."""

NAMESPACES = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")


def _root_layout(root_fs: str | None = None) -> list[str]:
    """``/usr``, the top-level links and the loader's ``/etc`` files of the host (or of ``root_fs``)."""
    base = Path(root_fs or "/")
    args = ["--ro-bind", str(base / "usr"), "/usr"]
    for name in TOP_LEVEL:
        host = base / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    args += ["--perms", "0755", "--dir", "/etc"]  # bwrap would make it 0700: the sandbox user could not enter
    for name in ETC_FILES:
        host = base / "etc" / name
        if host.exists() or host.is_symlink():
            args += ["--ro-bind", str(host), f"/etc/{name}"]
    return args


READ_ONLY_TOPS = frozenset({"usr", "proc", "dev", "etc", *TOP_LEVEL})
"""Top-level directories of the layout that are read-only or kernel-made: nothing can be
created under them, so a mount target's parents there must already exist."""


def _parent_dirs(target: str, seen: set[str]) -> list[str]:
    """``--perms 0755 --dir`` for every directory above ``target`` not made yet: bwrap creates
    missing ones 0700 as root, and the non-root sandbox user could not reach its own work dir
    or inputs through them. Parents inside an earlier mount (the sandbox's tmpfs ``/tmp``, a
    work dir bound at ``/home``) are made there, so an input may live at its own path under
    them; ``seen`` holds the directories already made or mounted."""
    parts = Path(target).parts[1:-1]
    args: list[str] = []
    if not parts or parts[0] in READ_ONLY_TOPS:
        return args
    for depth in range(1, len(parts) + 1):
        parent = "/" + "/".join(parts[:depth])
        if parent in seen or parent == "/tmp":
            continue
        seen.add(parent)
        args += ["--perms", "0755", "--dir", parent]
    return args


def _mounts(spec: SandboxSpec, devices: list[str], work_bytes: int | None) -> list[str]:
    """The work dir, the inputs and the devices, parents before children (a path sorts before
    everything under it), each preceded by the directories leading to it. With ``work_bytes``
    the work path is a tmpfs of that size (``workfs.py`` fills it), not a bind of the host's."""
    work_path = os.path.normpath(spec.work_path)
    entries = [(device, "--dev-bind", device) for device in devices]
    if work_bytes is None:
        entries.append((work_path, "--bind", os.fspath(spec.work_dir)))
    else:
        entries.append((work_path, "--tmpfs", str(work_bytes)))
    entries += [(os.path.normpath(target), "--ro-bind", host) for host, target in dict(spec.ro_binds).items()]
    seen: set[str] = set()
    args: list[str] = []
    for target, kind, host in sorted(entries, key=lambda entry: (entry[0].split("/"), entry[1])):
        args += _parent_dirs(target, seen)
        seen.add(target)
        args += ["--perms", "0755", "--size", host, "--tmpfs", target] if kind == "--tmpfs" else [kind, host, target]
    return args


@dataclass(frozen=True)
class BwrapFds:
    """The file descriptors bwrap is handed: the ``/etc/passwd`` and ``/etc/group`` it binds
    (``--ro-bind-data``), the pipe it waits on before starting the program (``--block-fd``)
    and the one it writes its JSON status to (``--json-status-fd``), and as root the seccomp
    filter that keeps the program from making a user namespace (``--seccomp``)."""

    passwd: int
    group: int
    block: int
    status: int
    seccomp: int | None = None
    """A compiled seccomp filter (``--seccomp``): no new user namespace, as root (:mod:`.seccomp`)."""

    def handed(self) -> tuple[int, ...]:
        """Every descriptor bwrap reads, to pass to it and close once it started."""
        return (self.passwd, self.group, self.block, self.status, *(() if self.seccomp is None else (self.seccomp,)))


def bwrap_args(spec: SandboxSpec, fds: BwrapFds, *, as_root: bool, tmp_bytes: int,
               keep_caps: tuple[str, ...] | None = None, work_bytes: int | None = None) -> list[str]:
    """``bwrap`` and its options up to (not including) the program's argv.

    ``as_root``: cmx runs as root, so bwrap mounts with real root and no user namespace, and
    ``setpriv`` (inside, from ``/usr``) drops to ``spec.user`` with no capabilities before
    the program starts. Otherwise a user namespace maps the caller's own (non-root) uid.
    ``keep_caps`` (as root only): start the program as root with just these capabilities and
    without ``setpriv``; a session's runner (``inner.py``) drops each program it starts itself.
    ``work_bytes``: the work path is a tmpfs of that size (see ``workfs.py``).
    """
    args = ["bwrap", *_root_layout(spec.root_fs)]
    args += ["--perms", "0644", "--ro-bind-data", str(fds.passwd), "/etc/passwd"]
    args += ["--perms", "0644", "--ro-bind-data", str(fds.group), "/etc/group"]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    if spec.shm_bytes is not None:
        args += ["--perms", "1777", "--size", str(spec.shm_bytes), "--tmpfs", "/dev/shm"]
    args += _mounts(spec, gpu_devices(spec.gpus), work_bytes)
    args += ["--remount-ro", "/"]  # the root tmpfs: a non-root caller's user namespace owns it, so it was writable
    args += ["--chdir", os.path.normpath(spec.work_path), *NAMESPACES, "--hostname", "sandbox",
             "--die-with-parent", "--new-session"]
    if not as_root:
        args += ["--unshare-user", "--disable-userns"]
    if fds.seccomp is not None:
        args += ["--seccomp", str(fds.seccomp)]
    if as_root and keep_caps is not None:
        args += ["--cap-drop", "ALL", *(arg for cap in keep_caps for arg in ("--cap-add", cap))]
    args += ["--block-fd", str(fds.block), "--json-status-fd", str(fds.status), "--"]
    if as_root and keep_caps is None:
        uid, gid = str(spec.user.uid), str(spec.user.gid)
        args += ["/usr/bin/setpriv", "--reuid", uid, "--regid", gid, "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--no-new-privs", "--"]
    return args


def options_in_fd(argv: list[str]) -> tuple[list[str], int]:
    """``argv`` (from :func:`bwrap_args`) with bwrap's options moved into a file descriptor,
    read by ``bwrap --args FD``: the command line is then ``bwrap --args FD -- PROGRAM...``.
    Inside the sandbox ``/proc/1/cmdline`` is bwrap's own (its first process is a fork of it),
    so the host paths of the binds (the cache entry, the run directory) are not shown there.
    The caller passes the descriptor to bwrap and closes it after the start."""
    cut = argv.index("--")  # bwrap's own end of options (paths are absolute: none is "--")
    fd = os.memfd_create("cmx-bwrap-args")
    try:
        os.write(fd, b"".join(arg.encode() + b"\0" for arg in argv[1:cut]))
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return [argv[0], "--args", str(fd), *argv[cut:]], fd


DEV = Path("/dev")
"""Where the NVIDIA device nodes are looked for (a test points it elsewhere)."""


def gpu_devices(gpus: int) -> list[str]:
    """The ``/dev/nvidia*`` nodes that give a program ``gpus`` GPUs (0: none, -1: all, N: the
    first N and the control nodes); a UsageError where the machine has fewer."""
    if gpus == 0:
        return []
    nodes = sorted(DEV.glob("nvidia*"))
    cards = [n for n in nodes if n.name[len("nvidia"):].isdigit()]
    if not cards:
        raise UsageError(f"sandbox gpus={gpus}: this machine has no GPU ({DEV}/nvidia* is absent); drop gpus, "
                         "or run on a GPU machine (the docker sandbox requests GPUs from the engine)")
    if gpus > len(cards):
        raise UsageError(f"sandbox gpus={gpus}: this machine has {len(cards)} GPU(s); ask for at most that many")
    keep = cards if gpus == -1 else sorted(cards, key=lambda n: int(n.name[len("nvidia"):]))[:gpus]
    return [str(n) for n in nodes if n not in cards or n in keep]


def identity_files(uid: int, gid: int) -> tuple[bytes, bytes]:
    """A two-line ``/etc/passwd`` and ``/etc/group``: root and the sandbox user, nothing of the host's."""
    passwd = f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:/nonexistent:/bin/sh\n"
    group = f"root:x:0:\nsandbox:x:{gid}:\n"
    return passwd.encode(), group.encode()


@functools.lru_cache(maxsize=8)
def _top_level(root: str) -> tuple[str, ...]:
    """The names of :data:`TOP_LEVEL` the root has (looked up once: a session asks per run)."""
    return tuple(name for name in TOP_LEVEL if os.path.lexists(os.path.join(root, name)))


def host_path(spec: SandboxSpec, inside: str) -> str | None:
    """The host path behind ``inside`` (an absolute path in the sandbox), if it is mounted."""
    base = spec.root_fs or "/"
    table = [("/usr", os.path.join(base, "usr")), (os.path.normpath(spec.work_path), os.fspath(spec.work_dir))]
    table += [(os.path.normpath(t), h) for h, t in dict(spec.ro_binds).items()]
    table += [(f"/{name}", _top_path(base, name)) for name in _top_level(base)]
    path = os.path.normpath(inside)
    best = max((entry for entry in table if path == entry[0] or path.startswith(entry[0] + "/")),
               key=lambda entry: len(entry[0]), default=None)
    if best is None:
        return None
    return best[1] + path[len(best[0]):]


def _top_path(base: str, name: str) -> str:
    """The host path of a top-level entry of ``base``: a merged-usr link resolved inside ``base``
    (``bin -> usr/bin``), never through the host's own root."""
    path = os.path.join(base, name)
    if not os.path.islink(path):
        return path
    target = os.readlink(path)
    return os.path.normpath(os.path.join(base, target.lstrip("/")))


def check_program(spec: SandboxSpec) -> None:
    """A UsageError unless ``argv[0]`` names an executable the sandbox can see."""
    program = spec.argv[0]
    if "/" in program:
        inside = program if program.startswith("/") else os.path.join(spec.work_path, program)
        host = host_path(spec, inside)
        if host is None or not os.path.isfile(host):
            raise UsageError(f"sandbox argv[0] {program!r} does not exist inside the sandbox (as {inside}); put it "
                             "in the work dir or an input, or use a program under /usr")
        return
    for folder in spec.full_env()["PATH"].split(":"):
        host = host_path(spec, os.path.join(folder, program)) if folder.startswith("/") else None
        if host and os.path.isfile(host) and os.access(host, os.X_OK):
            return
    raise UsageError(f"sandbox argv[0] {program!r} is not found on the sandbox's PATH "
                     f"({spec.full_env()['PATH']}); give its absolute path inside the sandbox")
