"""Reading procfs/sysfs files below a root path (``/``, or a recorded fixture tree)."""

from __future__ import annotations

from pathlib import Path

from cmx_core.conditions.values import Read, known, unknown


def under(root: Path, path: str) -> Path:
    """``path`` (absolute, as on a live machine) below ``root``."""
    return root / path.lstrip("/")


def read_text(root: Path, path: str) -> Read[str]:
    """The file's stripped text, or unknown naming the path and the error."""
    try:
        return known(under(root, path).read_text(encoding="utf-8", errors="replace").strip())
    except OSError as err:
        return unknown(f"{path}: {err.strerror or type(err).__name__}")


def read_int(root: Path, path: str) -> Read[int]:
    text = read_text(root, path)
    if not text.known or text.value is None:
        return Read(why=text.why)
    try:
        return known(int(text.value))
    except ValueError:
        return unknown(f"{path}: not an integer ({text.value[:40]!r})")


def cpu_list(text: str) -> tuple[int, ...]:
    """``0-3,6`` as (0, 1, 2, 3, 6); an empty list as ()."""
    cpus: list[int] = []
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return tuple(cpus)
