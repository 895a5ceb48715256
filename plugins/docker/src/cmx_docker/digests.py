"""sha256 of files and trees, with a stat-keyed memo so unchanged big files are not re-read.

The memo (``<cache>/docker/digests.json``) maps an absolute path to ``(size, mtime_ns,
sha256)``; a file whose size or mtime changed is hashed again. This keeps "does this image
need a rebuild?" well under 100 ms even when the context holds a large wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build",
              "dist", ".venv"}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_BIG = 1 << 20


class DigestMemo:
    """File digests remembered by (path, size, mtime_ns), plus rendered values remembered
    by a caller's key (:meth:`recall`/:meth:`remember`); saved with :meth:`save`."""

    _MAX_RENDERS = 256

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._data: dict[str, list[Any]] = {}
        self._renders: dict[str, Any] = {}
        self._dirty = False
        if path is not None and path.is_file():
            try:
                stored = json.loads(path.read_text())
                self._data = dict(stored.get("files", {}))
                self._renders = dict(stored.get("renders", {}))
            except (ValueError, AttributeError):
                self._data, self._renders = {}, {}

    def recall(self, key: str) -> Any:
        """The value remembered under ``key``, or None."""
        return self._renders.get(key)

    def remember(self, key: str, value: Any) -> None:
        if len(self._renders) >= self._MAX_RENDERS:
            self._renders.pop(next(iter(self._renders)))
        self._renders[key] = value
        self._dirty = True

    def file(self, path: Path) -> str:
        """sha256 hex of ``path``'s content."""
        st = path.stat()
        key = str(path.resolve())
        hit = self._data.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return str(hit[2])
        digest = _sha256_file(path)
        if st.st_size >= _BIG:  # small files are cheaper to re-read than to remember
            self._data[key] = [st.st_size, st.st_mtime_ns, digest]
            self._dirty = True
        return digest

    def save(self) -> None:
        if not self._dirty or self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"files": self._data, "renders": self._renders}))
        os.replace(tmp, self._path)
        self._dirty = False


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stat_fingerprint(paths: Iterable[Path]) -> str:
    """A digest of (path, size, mtime_ns) of ``paths`` (missing ones count too): cheap
    evidence that none of them changed."""
    h = hashlib.sha256()
    for path in paths:
        try:
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{path}\0missing\n".encode())
    return h.hexdigest()


def tree_files(root: Path, include: Iterable[str]) -> list[Path]:
    """Files under ``root``'s ``include`` entries (files or directories), sorted, skipping
    caches and byte code."""
    out: list[Path] = []
    for name in include:
        entry = root / name
        if entry.is_file():
            out.append(entry)
            continue
        for dirpath, dirnames, filenames in os.walk(entry):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            out.extend(Path(dirpath) / f for f in filenames if not f.endswith(_SKIP_SUFFIXES))
    return sorted(out)


def tree_digest(root: Path, include: Iterable[str], memo: DigestMemo) -> str:
    """One sha256 over the relative paths and contents of :func:`tree_files`."""
    h = hashlib.sha256()
    for path in tree_files(root, include):
        h.update(os.path.relpath(path, root).encode() + b"\0")
        h.update(memo.file(path).encode() + b"\n")
    return h.hexdigest()
