"""Run directories keep the invoking user's ownership.

The container never runs as root. As any other user it runs as that user's uid:gid, so what
it writes is already the user's. As root it runs as the image's ``cmx`` user (1000:1000),
which may be an unrelated account on the host; so after the container ends, everything in
the run directory is handed back to the invoking user: ``SUDO_UID``:``SUDO_GID`` when cmx was
started through ``sudo``, else root. Links are changed themselves (``lchown``), never followed.
"""

from __future__ import annotations

import os
from pathlib import Path


def invoking_user() -> tuple[int, int]:
    """(uid, gid) of the user cmx runs for: sudo's caller when root through sudo, else ours."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        try:
            return int(os.environ["SUDO_UID"]), int(os.environ.get("SUDO_GID", os.environ["SUDO_UID"]))
        except (KeyError, ValueError):
            return 0, 0
    return uid, gid


def hand_back(run_dir: Path, owner: tuple[int, int] | None = None) -> int:
    """Give every entry of ``run_dir`` (itself included) to ``owner`` (default: the invoking
    user); returns how many changed. Only root can and needs to: a no-op otherwise."""
    if os.geteuid() != 0 or not run_dir.exists():
        return 0
    uid, gid = owner or invoking_user()
    changed = 0
    for top, dirs, files in os.walk(run_dir):
        for name in [".", *dirs, *files]:
            path = os.path.join(top, name) if name != "." else top
            st = os.lstat(path)
            if (st.st_uid, st.st_gid) != (uid, gid):
                os.lchown(path, uid, gid)
                changed += 1
    return changed
