"""Unpacking tar archives through tarfile's extraction filters on every Python cmx supports.

The filters of PEP 706 (``data`` and ``tar``) arrived in Python 3.12 and were backported to
3.10.12 and 3.11.4. The system Python of Debian 12 is 3.11.2 and has neither, and that is
the interpreter an unprivileged user has there (root's own builds are out of their reach).
Where tarfile has the filters, :func:`extract_all` hands them to it unchanged. Where it has
not, the same checks run here, member by member, in the order the archive is read, so a
path that would leave the destination through a link unpacked earlier is refused just as
the real filter refuses it. Refusals there raise :class:`FilterError`, a
:class:`tarfile.TarError` like the real filter's errors.

One difference is left: where the real ``data`` filter leaves a directory's mode to the
umask, the fallback keeps the archive's mode without its high and group/other-write bits,
with the owner's ``rwx`` added (tarfile before 3.12 cannot leave a mode unset).
"""

from __future__ import annotations

import copy
import os
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

Filter = Callable[[tarfile.TarInfo, str], "tarfile.TarInfo | None"]
"""tarfile's filter signature: a member and the destination folder, the member to unpack
(possibly changed) or None to skip it; refusals raise."""

NATIVE = hasattr(tarfile, "data_filter")
"""Whether this Python's tarfile has the PEP 706 filters itself."""


class FilterError(tarfile.TarError):
    """A member the fallback filter refuses (the real filter's error class is missing here)."""


def _inside(path: str, dest: str) -> bool:
    return os.path.commonpath([path, dest]) == dest


def _filtered(member: tarfile.TarInfo, dest_path: str, for_data: bool) -> tarfile.TarInfo:
    """PEP 706's checks and attribute changes, for a tarfile that lacks them."""
    dest = os.path.realpath(dest_path)
    name = member.name.lstrip("/" + os.sep)
    if os.path.isabs(name):
        raise FilterError(f"member {member.name!r} has an absolute path")
    target = os.path.realpath(os.path.join(dest, name))
    if not _inside(target, dest):
        raise FilterError(f"{member.name!r} would be extracted to {target!r}, outside the destination")
    mode = member.mode & 0o755
    if for_data:
        if member.isreg() or member.islnk():
            mode = (mode if mode & 0o100 else mode & ~0o111) | 0o600
        elif member.isdir():
            mode |= 0o700
        elif not member.issym():
            raise FilterError(f"{member.name!r} is a special file")
        if member.islnk() or member.issym():
            if os.path.isabs(member.linkname):
                raise FilterError(f"{member.name!r} is a link to an absolute path")
            base = os.path.join(dest, os.path.dirname(name)) if member.issym() else dest
            link_target = os.path.realpath(os.path.join(base, member.linkname))
            if not _inside(link_target, dest):
                raise FilterError(f"{member.name!r} would link to {link_target!r}, outside the destination")
    changed = copy.copy(member)
    changed.name = name
    changed.mode = mode
    if for_data:   # ownership is not the archive's to set: the unpacking user's own, by number
        changed.uid, changed.gid, changed.uname, changed.gname = os.geteuid(), os.getegid(), "", ""
    return changed


def tar_filter(member: tarfile.TarInfo, dest_path: str) -> tarfile.TarInfo:
    """tarfile's ``tar`` filter: leading ``/`` stripped, nothing outside ``dest_path``, no
    setuid, setgid, sticky or group/other-write bits."""
    if NATIVE:
        return tarfile.tar_filter(member, dest_path)
    return _filtered(member, dest_path, for_data=False)


def data_filter(member: tarfile.TarInfo, dest_path: str) -> tarfile.TarInfo:
    """tarfile's ``data`` filter: the ``tar`` filter, and no special files, no links to
    absolute paths or outside ``dest_path``, and ownership left to the unpacking user."""
    if NATIVE:
        return tarfile.data_filter(member, dest_path)
    return _filtered(member, dest_path, for_data=True)


def _vetted(tar: tarfile.TarFile, dest: str, keep: Filter) -> Iterator[tarfile.TarInfo]:
    for member in tar:
        changed = keep(member, dest)
        if changed is not None:
            yield changed


def extract_all(tar: tarfile.TarFile, dest: Path, keep: Filter = data_filter, *,
                numeric_owner: bool = False) -> None:
    """Unpack every member of ``tar`` that ``keep`` lets through into ``dest``. Works on a
    stream (mode ``r|``): each member is checked just before it is unpacked."""
    if NATIVE:
        tar.extractall(dest, numeric_owner=numeric_owner, filter=keep)
        return
    tar.extractall(dest, members=_vetted(tar, str(dest), keep), numeric_owner=numeric_owner)
