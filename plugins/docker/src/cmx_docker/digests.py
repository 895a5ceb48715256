"""sha256 of files and trees, with a stat-keyed memo so unchanged big files are not re-read.

The memo (``<cache>/docker/digests.json``) maps an absolute path to ``(size, mtime_ns,
sha256)``; a file whose size or mtime changed is hashed again. This keeps "does this image
need a rebuild?" well under 100 ms even when the context holds a large wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cmx_docker.errors import ContextError

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
    """The files under ``root``'s ``include`` entries (files or directories) that the
    checkout declares: those git tracks, sorted, without caches and byte code. A file git
    does not track (a local credentials file, a scratch copy, a build output) never reaches
    an image, whatever directory it sits in. A ContextError when ``root`` is not in a git
    checkout: without one, what is declared cannot be told from what merely lies there."""
    out = []
    for path in tracked_files(root, tuple(include)):
        parts = path.relative_to(root).parts if path.is_relative_to(root) else path.parts
        if path.is_file() and not path.name.endswith(_SKIP_SUFFIXES) and not _SKIP_DIRS & set(parts[:-1]):
            out.append(path)
    return sorted(out)


def tracked_files(root: Path, include: tuple[str, ...]) -> list[Path]:
    """``git ls-files`` of ``include`` (paths relative to ``root``, maybe ``../``)."""
    if not include:
        return []
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--", *include],
                              capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContextError(f"{root}: cannot list the files git tracks ({exc}); cmx-docker builds images "
                           "only from a git checkout's tracked files") from None
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[:1]
        raise ContextError(f"{root}: not a git checkout ({why[0] if why else 'git failed'}); cmx-docker builds "
                           "images only from the files git tracks: clone the repository, or set CMX_SOURCE_DIR "
                           "to a clone")
    return [(root / name).resolve() for name in done.stdout.decode().split("\0") if name]


def tree_digest(root: Path, include: Iterable[str], memo: DigestMemo) -> str:
    """One sha256 over the relative paths and contents of :func:`tree_files`."""
    h = hashlib.sha256()
    for path in tree_files(root, include):
        h.update(os.path.relpath(path, root).encode() + b"\0")
        h.update(memo.file(path).encode() + b"\n")
    return h.hexdigest()
