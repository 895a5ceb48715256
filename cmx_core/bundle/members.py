"""Read a bundle's tar without trusting it: only regular files (and directories) with plain
relative names are accepted; a link, a device, an absolute name, a ``..`` component or a
name given twice is refused with the member named, before anything is written anywhere."""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath

from cmx_core.errors import ResultsError

MAX_MEMBER_BYTES = 4 << 30
"""A member larger than this is refused (the manifest's sizes are checked before reading)."""


def read_members(bundle: Path) -> dict[str, bytes]:
    """Every regular file member's bytes by name; a ResultsError for anything unsafe."""
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(bundle, "r:gz") as archive:
            for member in archive:
                name = _checked_name(bundle, member)
                if member.isdir():
                    continue
                if name in found:
                    raise ResultsError(f"{bundle}: member {name} appears twice; the bundle was altered")
                if member.size > MAX_MEMBER_BYTES:
                    raise ResultsError(f"{bundle}: member {name} is {member.size} bytes, over the limit")
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
