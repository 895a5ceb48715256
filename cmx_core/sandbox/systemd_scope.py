"""A cgroup v2 scope from the systemd user manager, for a non-root user with no delegated group.

Where this user has no cgroup of its own to make a run's group in (``cgroup2.parent_group``
is None) but a systemd user manager runs, the sandbox starts ``bwrap`` through
``systemd-run --user --scope``: systemd-run asks the user manager for a transient scope
with the run's limits as unit properties (``MemoryMax``, ``MemorySwapMax=0``, ``TasksMax``),
moves itself into it and execs ``bwrap`` (so the pipes and the ``--block-fd`` and
``--json-status-fd`` descriptors pass through unchanged). The scope is a cgroup v2 group the
manager made; the sandbox reads it back from the sandbox process's ``/proc/PID/cgroup`` and
measures from it as from a group of its own (``memory.peak``, ``memory.events``,
``cpu.stat``), but never writes its limits (systemd did) nor removes it (``--collect``: the
manager does once it is empty).

A user manager is there when its private socket exists (``$XDG_RUNTIME_DIR/systemd/private``,
``/run/user/UID/systemd/private`` by default) and ``systemd-run`` is installed; a machine
without it (a container, CI, a login without ``pam_systemd``) gets the fallbacks.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx_core.sandbox.spec import Limits

RUNTIME_DIR_ENV = "XDG_RUNTIME_DIR"


@dataclass(frozen=True)
class UserManager:
    """A systemd user manager this process can ask for a scope."""

    systemd_run: str
    socket: Path


def user_manager(env: Mapping[str, str] | None = None, uid: int | None = None) -> UserManager | None:
    """The systemd user manager of this user, or None where none runs (or as root, whose
    groups the sandbox makes itself)."""
    uid = os.geteuid() if uid is None else uid
    if uid == 0:
        return None
    env = os.environ if env is None else env
    runtime = Path(env.get(RUNTIME_DIR_ENV) or f"/run/user/{uid}")
    socket = runtime / "systemd" / "private"
    try:
        is_socket = stat.S_ISSOCK(socket.stat().st_mode)
    except OSError:
        return None
    program = shutil.which("systemd-run", path=env.get("PATH") or os.defpath)
    if not is_socket or program is None:
        return None
    return UserManager(program, socket)


def scope_properties(limits: Limits) -> list[str]:
    """The scope's unit properties for ``limits`` (only those systemd bounds with a cgroup)."""
    found = ["Delegate=yes"]
    if limits.memory_bytes is not None:
        found += [f"MemoryMax={limits.memory_bytes}", "MemorySwapMax=0"]
    if limits.processes is not None:
        found.append(f"TasksMax={limits.processes + 1}")  # bwrap's outer process is in the scope too
    return found


def scope_prefix(manager: UserManager, limits: Limits) -> list[str]:
    """``systemd-run --user --scope ... --`` to put in front of the ``bwrap`` command line."""
    args = [manager.systemd_run, "--user", "--scope", "--quiet", "--collect"]
    for prop in scope_properties(limits):
        args += ["-p", prop]
    return [*args, "--"]


def scope_limits(limits: Limits) -> list[str]:
    """The ``enforced`` entries of a run in a scope with :func:`scope_properties`."""
    found = []
    if limits.memory_bytes is not None:
        found.append("memory=systemd-scope")
    if limits.processes is not None:
        found.append("processes=systemd-scope")
    return found


__all__ = ["UserManager", "scope_limits", "scope_prefix", "scope_properties", "user_manager"]
