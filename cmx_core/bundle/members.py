"""Read a bundle's tar without trusting it: only regular files (and directories) with plain
relative names are accepted; a link, a device, an absolute name, a ``..`` component or a
name given twice is refused with the member named, before anything is written anywhere.

Bounds (:class:`Limits`): one member at most ``member_bytes``, all members together at most
``total_bytes`` and at most ``members`` of them; each is checked from the tar headers before
the member's bytes are read, so an oversized bundle is refused having read and written
nothing more. Settable with ``--max-bytes`` / ``--max-members`` or ``CMX_BUNDLE_MAX_BYTES`` /
``CMX_BUNDLE_MAX_MEMBERS``."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cmx_core.errors import ResultsError, UsageError

MAX_MEMBER_BYTES = 4 << 30
"""A member larger than this is refused (the manifest's sizes are checked before reading)."""
MAX_TOTAL_BYTES = 16 << 30
"""All members together larger than this: the bundle is refused."""
MAX_MEMBERS = 100_000
"""More members than this: the bundle is refused."""
BYTES_ENV = "CMX_BUNDLE_MAX_BYTES"
MEMBERS_ENV = "CMX_BUNDLE_MAX_MEMBERS"


@dataclass(frozen=True)
class Limits:
    total_bytes: int = MAX_TOTAL_BYTES
    members: int = MAX_MEMBERS
    member_bytes: int = MAX_MEMBER_BYTES


def limits(total_bytes: int | None = None, members: int | None = None,
           env: Mapping[str, str] | None = None) -> Limits:
    """The bounds from the command line, else the environment, else the defaults."""
    env = os.environ if env is None else env
    total = total_bytes if total_bytes is not None else _env_int(env, BYTES_ENV, MAX_TOTAL_BYTES)
    count = members if members is not None else _env_int(env, MEMBERS_ENV, MAX_MEMBERS)
    if total < 1 or count < 1:
        raise UsageError(f"bundle limits must be positive (--max-bytes {total}, --max-members {count})")
    return Limits(total, count, min(MAX_MEMBER_BYTES, total))


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r}: give a whole number") from None


def read_members(bundle: Path, bounds: Limits | None = None) -> dict[str, bytes]:
    """Every regular file member's bytes by name; a ResultsError for anything unsafe or over
    the ``bounds``."""
    bounds = bounds or Limits()
    found: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(bundle, "r:gz") as archive:
            for member in archive:
                name = _checked_name(bundle, member)
                if member.isdir():
                    continue
                if name in found:
                    raise ResultsError(f"{bundle}: member {name} appears twice; the bundle was altered")
                if member.size > bounds.member_bytes:
                    raise ResultsError(f"{bundle}: member {name} is {member.size} bytes, over the limit")
                total += member.size
                if total > bounds.total_bytes:
                    raise ResultsError(f"{bundle}: its members hold more than {bounds.total_bytes} bytes (the limit; "
                                       f"--max-bytes or {BYTES_ENV} raises it): refused, nothing written")
                if len(found) >= bounds.members:
                    raise ResultsError(f"{bundle}: more than {bounds.members} members (the limit; --max-members or "
                                       f"{MEMBERS_ENV} raises it): refused, nothing written")
                handle = archive.extractfile(member)
                if handle is None:
                    raise ResultsError(f"{bundle}: member {name} cannot be read")
                found[name] = handle.read()
    except FileNotFoundError:
        raise ResultsError(f"{bundle}: no such bundle file") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ResultsError(f"{bundle}: not a readable .tar.gz bundle ({exc}); the file is damaged or "
                           "not a bundle") from None
    return found


def _checked_name(bundle: Path, member: tarfile.TarInfo) -> str:
    name = member.name
    if member.issym() or member.islnk():
        raise ResultsError(f"{bundle}: member {name} is a link (to {member.linkname}); bundles hold plain files only")
    if not (member.isfile() or member.isdir()):
        raise ResultsError(f"{bundle}: member {name} is not a regular file; bundles hold plain files only")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name or not name.strip("/."):
        raise ResultsError(f"{bundle}: member {name} has an unsafe name (absolute or with ..); refused")
    return path.as_posix()
