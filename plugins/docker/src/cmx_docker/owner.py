"""Who owns a container: the cmx process that created it, named so PID reuse cannot fool us.

Every container cmx-docker creates carries ``org.cmx.owner-*`` labels: the host name, the
kernel's boot id, the PID and that process's start time (clock ticks since boot, field 22
of ``/proc/PID/stat``). A container's owner is gone when, on this host, the boot id differs
(a reboot), no process has the PID, or the process with the PID started at another time
(the PID was reused). :mod:`cmx_docker.reaper` removes the containers whose owner is gone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

PREFIX = "org.cmx.owner-"
HOST, BOOT, PID, START = (f"{PREFIX}{k}" for k in ("host", "boot", "pid", "start"))


def boot_id() -> str:
    """The kernel's id of this boot (``/proc/sys/kernel/random/boot_id``)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


def owner_labels(pid: int | None = None) -> dict[str, str]:
    """The labels naming this process (or ``pid``) as a container's owner."""
    pid = os.getpid() if pid is None else pid
    return {HOST: socket.gethostname(), BOOT: boot_id(), PID: str(pid), START: start_ticks(pid) or "?"}


def is_ours(labels: Mapping[str, str]) -> bool:
    """True when the labels name an owner on this host (others' containers are never touched)."""
    return labels.get(HOST) == socket.gethostname()


def owner_gone(labels: Mapping[str, str]) -> bool:
    """True when the owning process of a container created on this host no longer exists."""
    if not is_ours(labels):
        return False
    if labels.get(BOOT) != boot_id():
        return True
    try:
        pid = int(labels.get(PID, ""))
    except ValueError:
        return True
    return start_ticks(pid) != labels.get(START)
