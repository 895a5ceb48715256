"""The runner inside a sandbox session (standard library only: it runs on the sandbox's own
``/usr/bin/python3 -I -S``, not in cmx's environment).

It serves one request at a time from the control socket (its fd is the one argument): empty the
session's ``/tmp`` and ``/dev/shm``, fork, and in the child take the request's stdin, stdout
and stderr (passed as file descriptors), reset the OOM score the runner protects itself
with, lower the rlimits, enter the work dir and drop to the non-root user without any capability
(what ``setpriv`` does for a single run, done here to save an exec; the empty bounding set
and ``no_new_privs`` are set once, on the runner, and inherited) and exec the program.
The host reads the output, enforces the limits and kills what is left; the wait status,
sent back when the program has exited, is the one message per run. The runner itself keeps
only the capabilities these steps need. It never runs anything the host did not ask for, and the program's user cannot
signal or trace it (another uid, no capabilities).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import socket
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
SCRATCH = ("/tmp", "/dev/shm")
_DROPPED = (("CapEff", "0000000000000000"), ("CapPrm", "0000000000000000"), ("CapBnd", "0000000000000000"),
            ("CapAmb", "0000000000000000"), ("NoNewPrivs", "1"))
"""What ``/proc/self/status`` must say of a program's process before its exec."""


def _empty(folder: str) -> None:
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _seal() -> None:
    """Once, in the runner: every capability out of the bounding set and no privilege to gain
    by any exec, for the runner and, inherited, for every program it starts. The runner keeps
    the capabilities it holds (the bounding set only limits what an exec may grant) and never
    execs itself, so this costs it nothing; done once here instead of once per program."""
    last = int(_read("/proc/sys/kernel/cap_last_cap"))
    for cap in range(last + 1):
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"could not drop capability {cap} from the bounding set")
    if LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not set no_new_privs")


def _drop(uid: int, gid: int) -> None:
    """Become ``uid``:``gid`` for good, as ``setpriv --reuid --regid --clear-groups --inh-caps=-all
    --bounding-set=-all --no-new-privs`` does: no supplementary group and all three uids and
    gids changed (which clears the permitted, effective and ambient sets); the empty bounding
    set and no_new_privs come from the runner (:func:`_seal`). Checked before the exec."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    status = _read("/proc/self/status")
    if os.getresuid() != (uid, uid, uid) or any(f"{key}:\t{value}" not in status for key, value in _DROPPED):
        raise OSError("the drop to the sandbox user did not take")


def _child(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: never returns (exec, or exit 127 with the reason on stderr)."""
    try:
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        os.closerange(3, 65536)
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("0")
        for which, soft, hard in request["rlimits"]:  # type: ignore[attr-defined]
            resource.setrlimit(int(which), (int(soft), int(hard)))
        os.chdir(str(request["cwd"]))
        _drop(int(request["uid"]), int(request["gid"]))  # type: ignore[call-overload]
        argv = list(request["argv"])  # type: ignore[call-overload]
        os.execvpe(argv[0], argv, dict(request["env"]))  # type: ignore[call-overload]
    except BaseException as exc:  # noqa: BLE001 - reported as the program's failure
        try:
            os.write(2, f"sandbox: the session runner could not start the program: {exc}\n".encode())
        finally:
            os._exit(127)


def serve(control: socket.socket) -> None:
    _seal()
    control.send(b'{"ready": true}')
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        for folder in SCRATCH:
            _empty(folder)
        pid = os.fork()
        if pid == 0:
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        _, status, usage = os.wait4(pid, 0)
        control.send(json.dumps({"status": status, "cpu_s": usage.ru_utime + usage.ru_stime}).encode())


def main() -> int:
    control = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(control)
    finally:
        control.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
