"""The content-addressed cache.

An entry lives at ``<cache>/entries/<key[:2]>/<key>/`` with ``meta.json`` (key parts,
outputs, recorded paths) and ``files/`` (what the node's steps wrote). Entries are staged in
``<cache>/staging/`` and renamed into place only after every step succeeded, under a file
lock per key, so concurrent processes and interrupted or failed runs never leave a half
entry. A hit is validated: the meta parses and matches its own digest, the entry has not
expired, every recorded path still exists with the same size (and, outside the entry, the
same mtime), and the step's own validator (if any) agrees.

Integrity and moves (format 2): ``meta.json`` carries ``meta_digest``, the sha256 of the rest
of it, and ``output_digests``, the sha256 of each file the outputs name inside the entry.
A hit always re-checks the metadata digest: a tampered ``meta.json`` is a miss with the reason
(and a warning naming the entry), so the node is recomputed and the entry replaced. The
output digests are checked on request, by ``cmx cache verify [KEY]``. Paths inside the entry
are stored relative to it (``${CMX_ENTRY}/files/...``), so a copied or moved cache directory
still hits; an entry without a format-2 digest (an older cmx) is a miss with that reason.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from cmx_core import paths, reads
from cmx_core.datautil import atomic_write, digest, iter_strings, loads_bounded, read_bounded
from cmx_core.errors import CacheError

META = "meta.json"
FORMAT = 2
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
ENTRY_REF = "${CMX_ENTRY}"
"""Stands for the entry's own directory in a stored ``meta.json``."""


class CacheEntry(NamedTuple):
    """A committed entry as read from disk."""

    key: str
    path: Path
    meta: Mapping[str, Any]

    @property
    def outputs(self) -> Mapping[str, Any]:
        outputs = self.meta.get("outputs")
        return outputs if isinstance(outputs, Mapping) else {}

    @property
    def recipe(self) -> str:
        return str(self.meta.get("recipe", "?"))

    @property
    def created(self) -> float:
        return float(self.meta.get("created", 0))

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


class Staging(NamedTuple):
    """A node's entry being written; ``files`` is the node's work directory."""

    key: str
    path: Path

    @property
    def files(self) -> Path:
        return self.path / "files"


class Cache:
    """Lookup, staging and housekeeping of cache entries."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or paths.cache_dir()
        self._entries = os.path.join(self.root, "entries")  # joined once: a plan looks up every node

    def entry_dir(self, key: str) -> Path:
        return Path(self._entries, key[:2], key)

    # -- lookup ---------------------------------------------------------------------------

    def lookup(self, key: str, expires_s: float | None = None) -> tuple[CacheEntry | None, str]:
        """The valid entry for ``key`` (or None) and why it is not usable."""
        meta_text = f"{self._entries}{os.sep}{key[:2]}{os.sep}{key}{os.sep}{META}"  # a plan looks up every node
        reads.file(meta_text)  # a hit, or a miss, holds only while this file stays as it is
        try:
            os.stat(meta_text)
        except OSError as exc:
            if exc.errno not in _ABSENT:  # as Path.exists: a permission error is raised
                raise
            return None, "no entry"
        meta_file = Path(meta_text)
        path = meta_file.parent
        meta = _read_meta(meta_file)
        if meta is None or meta.get("key") != key:
            print(f"cmx: warning: cache entry {path} is corrupt; it will be recomputed", file=sys.stderr)
            return None, "corrupt entry"
        if meta.get("format") != FORMAT:
            return None, "entry written by an older cmx (no metadata digest); it will be recomputed"
        if meta.get("meta_digest") != meta_digest(meta):
            print(f"cmx: warning: cache entry {path}: {META} does not match its digest (changed after it was "
                  f"written); it will be recomputed (or remove it: cmx cache rm {key})", file=sys.stderr)
            return None, f"{META} does not match its digest (tampered or damaged)"
        stored, meta = meta, resolve_meta(meta, path)
        if expires_s is not None and time.time() - float(meta.get("created", 0)) > expires_s:
            return None, f"expired (older than {expires_s:g} s)"
        changed = _changed_path(meta.get("paths", {}), inside=str(path))
        if changed:
            return None, f"recorded path changed: {changed}"
        changed = _content_changed(stored, path)  # the stored meta: a refresh rewrites it as stored
        if changed:
            return None, changed
        for recorded in meta.get("paths", {}):
            reads.file(recorded)
        if expires_s is not None:
            reads.deadline(float(meta.get("created", 0)) + float(expires_s))
        return CacheEntry(key, path, meta), "hit"

    # -- writing --------------------------------------------------------------------------

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the per-key lock (other processes computing the same key wait)."""
        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock  # deferred: filelock (and decimal) only when a step is cached

        with FileLock(str(lock_dir / f"{key}.lock")):
            yield

    @contextmanager
    def stage(self, key: str) -> Iterator[Staging]:
        """A fresh staging directory; removed on any failure or interruption."""
        staging_root = self.root / "staging"
        staging_root.mkdir(parents=True, exist_ok=True)
        staging = Staging(key, staging_root / f"{key}.{os.getpid()}.{os.urandom(4).hex()}")
        staging.files.mkdir(parents=True)
        try:
            yield staging
        except BaseException:
            _rmtree(staging.path, ignore_errors=True)
            raise

    def commit(self, staging: Staging, meta: dict[str, Any]) -> CacheEntry:
        """Write meta, rename the staged entry into place; returns the committed entry."""
        final = self.entry_dir(staging.key)
        here = str(staging.path)
        stored = {**meta, "format": FORMAT, "key": staging.key, "created": time.time(),
                  "outputs": rebase(meta.get("outputs", {}), here, ENTRY_REF),
                  "paths": {_relative(p, here): v for p, v in _record_paths(meta.get("outputs", {})).items()},
                  "output_digests": _output_digests(meta.get("outputs", {}), here)}
        stored["stats"] = {rel: _stat_of(os.path.join(here, rel)) for rel in stored["output_digests"]}
        stored = json.loads(json.dumps(stored, default=str))  # the digest is of what is read back
        stored["meta_digest"] = meta_digest(stored)
        (staging.path / META).write_text(json.dumps(stored, indent=1, sort_keys=True))
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            trash = final.with_name(f"{final.name}.old.{os.urandom(4).hex()}")
            os.rename(final, trash)
            _rmtree(trash, ignore_errors=True)
        os.rename(staging.path, final)
        return CacheEntry(staging.key, final, resolve_meta(stored, final))

    def verify(self, entry: CacheEntry) -> list[str]:
        """What is wrong with ``entry``: its metadata digest, or an output file that is gone
        or whose content digest changed (empty when it is sound)."""
        meta = _read_meta(entry.path / META)
        if meta is None:
            return [f"{META} is unreadable or of the wrong shape"]
        if meta.get("format") != FORMAT:
            return ["written by an older cmx: no digests to check"]
        if meta.get("meta_digest") != meta_digest(meta):
            return [f"{META} does not match its digest (tampered or damaged)"]
        problems = []
        for rel, expected in sorted(dict(meta.get("output_digests") or {}).items()):
            target = entry.path / rel
            try:
                actual = _file_digest(target)
            except OSError:
                problems.append(f"output {rel} is missing")
                continue
            if actual != expected:
                problems.append(f"output {rel} changed (sha256 {str(expected)[:12]} -> {actual[:12]})")
        return problems

    # -- housekeeping ---------------------------------------------------------------------

    def entries(self) -> list[CacheEntry]:
        """Every committed entry (corrupt ones are listed with an empty meta)."""
        found = []
        for meta_file in sorted((self.root / "entries").glob(f"*/*/{META}")):
            meta = _read_meta(meta_file)
            meta = resolve_meta(meta, meta_file.parent) if meta is not None else {"recipe": "<corrupt>"}
            found.append(CacheEntry(meta_file.parent.name, meta_file.parent, meta))
        return found

    def find(self, prefix: str) -> CacheEntry:
        """The entry whose key starts with ``prefix`` (unique)."""
        matches = [e for e in self.entries() if e.key.startswith(prefix)]
        if not matches:
            raise CacheError(f"no cache entry matches '{prefix}' (see 'cmx cache list')")
        if len(matches) > 1:
            raise CacheError(f"'{prefix}' matches {len(matches)} cache entries; give more of the key")
        return matches[0]

    def remove(self, entry: CacheEntry) -> None:
        trash = entry.path.with_name(f"{entry.path.name}.rm.{os.urandom(4).hex()}")
        os.rename(entry.path, trash)
        _rmtree(trash, ignore_errors=True)

    def prune(self, older_than_s: float | None = None) -> list[CacheEntry]:
        """Remove corrupt, invalid (changed paths), expired (the recipe's ``cache.expires``)
        and, optionally, old entries; and leftovers of killed processes in staging. (The
        warm-run memos are pruned by ``cmx cache prune`` through :mod:`cmx_core.run.replay`.)"""
        removed = []
        now = time.time()
        for entry in self.entries():
            if _stale(entry, now) or (older_than_s is not None and now - entry.created > older_than_s):
                self.remove(entry)
                removed.append(entry)
        self.clean_staging()
        return removed

    def prepare(self) -> None:
        """Make the directories a run writes into (staging, entries, locks): one that is a
        file, or cannot be made, is an OSError naming it before the run starts."""
        for name in ("staging", "entries", "locks"):
            (self.root / name).mkdir(parents=True, exist_ok=True)

    def clean_staging(self) -> int:
        """Remove the staging directories of processes that are gone (a killed cmx); cheap
        enough for every run's start. Returns how many were removed."""
        removed = 0
        for leftover in (self.root / "staging").glob("*"):
            if not _pid_alive(leftover.name):
                _rmtree(leftover, ignore_errors=True)
                removed += 1
        return removed

    def valid_recipes(self) -> dict[str, float]:
        """Every recipe with an entry that is neither corrupt, changed nor expired: recipe ->
        when its newest such entry was made (what CM calls a cached script)."""
        now = time.time()
        found: dict[str, float] = {}
        for entry in self.entries():
            if not _stale(entry, now):
                found[entry.recipe] = max(found.get(entry.recipe, 0.0), entry.created)
        return found

    def previous_for(self, recipe: str) -> CacheEntry | None:
        """The newest entry of ``recipe`` (for explaining a miss)."""
        same = [e for e in self.entries() if e.recipe == recipe]
        return max(same, key=lambda e: e.created) if same else None


def _stale(entry: CacheEntry, now: float) -> bool:
    """Corrupt, a recorded path changed, or past the recipe's ``cache.expires``."""
    if entry.recipe == "<corrupt>" or _changed_path(entry.meta.get("paths", {}), inside=str(entry.path)):
        return True
    expires = entry.meta.get("expires_s")
    return expires is not None and now - entry.created > expires


def cached_recipes(recipes: Iterable[str], root: Path | None = None) -> dict[str, float]:
    """Of ``recipes``, those :meth:`Cache.valid_recipes` of the cache at ``root`` (default:
    cmx's own) has: recipe -> when its newest valid entry was made."""
    wanted = set(recipes)
    return {recipe: made for recipe, made in Cache(root).valid_recipes().items() if recipe in wanted}


def _rmtree(path: Path, ignore_errors: bool = True) -> None:
    shutil.rmtree(path, ignore_errors=ignore_errors)


def rebase(value: Any, old: str, new: str) -> Any:
    """Replace the ``old`` directory prefix by ``new`` in every string of ``value``."""
    if isinstance(value, str):
        return new + value[len(old):] if value.startswith(old) else value
    if isinstance(value, Mapping):
        return {k: rebase(v, old, new) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rebase(v, old, new) for v in value]
    return value


def meta_digest(meta: Mapping[str, Any]) -> str:
    """sha256 of an entry's stored metadata without its ``meta_digest`` field."""
    return digest({k: v for k, v in meta.items() if k != "meta_digest"})


def resolve_meta(meta: Mapping[str, Any], entry: Path) -> dict[str, Any]:
    """Stored metadata with ``${CMX_ENTRY}`` made the entry's current directory."""
    where = str(entry)
    out = dict(meta)
    out["outputs"] = rebase(meta.get("outputs", {}), ENTRY_REF, where)
    out["paths"] = {rebase(p, ENTRY_REF, where): v for p, v in dict(meta.get("paths") or {}).items()}
    return out


def _relative(path: str, entry: str) -> str:
    return ENTRY_REF + path[len(entry):] if path == entry or path.startswith(entry + "/") else path


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _output_digests(outputs: Any, entry: str) -> dict[str, str]:
    """Relative path -> sha256 of every file the outputs name inside the entry (a directory:
    each file under it)."""
    found: dict[str, str] = {}
    for text in iter_strings(outputs):
        if not (text.startswith(entry + "/") and len(text) < 4096):
            continue
        top = Path(text)
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else []
        for file in files:
            found[str(file)[len(entry) + 1:]] = _file_digest(file)
    return found


def _stat_of(path: str) -> list[int]:
    """What tells an in-place edit from an untouched file without reading it: size, mtime,
    ctime (set by the kernel on every write and every ``utime``, so an edit that restores the
    size and mtime still changes it) and inode."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _content_changed(meta: dict[str, Any], entry: Path) -> str | None:
    """Why an entry's output files are not what was cached (None when they are). A file
    whose size differs has changed; one whose (mtime, ctime, inode) are as recorded has not;
    any other (edited in place, or the cache was copied or moved) is hashed once and compared
    with its digest, and a match refreshes the recorded stats so the next lookup is a stat."""
    stats, digests = meta.get("stats") or {}, meta.get("output_digests") or {}
    fresh: dict[str, list[int]] = {}
    for rel, recorded in stats.items():
        target = os.path.join(entry, rel)
        reads.file(target)  # the warm-run replay checks it too (its ctime included)
        try:
            now = _stat_of(target)
        except OSError:
            return f"output {rel} is missing"
        if now == recorded:
            continue
        if now[0] != recorded[0]:
            return f"output {rel} changed (size {recorded[0]} -> {now[0]})"
        if _file_digest(Path(target)) != digests.get(rel):
            return f"output {rel} changed in place (its content no longer matches its digest)"
        fresh[rel] = now
    if fresh:
        _refresh_stats(entry / META, meta, fresh)
    return None


def _refresh_stats(meta_file: Path, meta: dict[str, Any], fresh: dict[str, list[int]]) -> None:
    """Record the new stats of files whose content was checked (best effort, atomic)."""
    updated = {**meta, "stats": {**meta["stats"], **fresh}}
    updated["meta_digest"] = meta_digest(updated)
    try:
        atomic_write(meta_file, json.dumps(updated, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only cache: the next lookup hashes again


def _record_paths(outputs: Any) -> dict[str, list[int]]:
    """(size, mtime_ns, ctime_ns, inode) of every existing absolute path among the outputs: a
    file outside the entry (a dataset a get- recipe points to) edited in place, even with its
    size and mtime put back, no longer matches (every write moves the ctime)."""
    found: dict[str, list[int]] = {}
    for text in iter_strings(outputs):
        if text.startswith("/") and len(text) < 4096:
            try:
                st = os.stat(text)
            except OSError:
                continue
            found[text] = [0 if os.path.isdir(text) else st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return found


def _read_meta(meta_file: Path) -> dict[str, Any] | None:
    """An entry's metadata if it has the expected shape, else None (corrupt)."""
    try:
        meta = loads_bounded(read_bounded(meta_file))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    paths = meta.get("paths", {})
    shapes_ok = (
        isinstance(meta.get("created", 0), (int, float))
        and isinstance(meta.get("outputs", {}), dict)
        and isinstance(paths, dict)
        and all(isinstance(v, list) and len(v) in (2, 4) and all(isinstance(x, int) for x in v) for v in paths.values())
        and isinstance(meta.get("expires_s"), (int, float, type(None)))
        and isinstance(meta.get("facts_read", {}), dict)
        and isinstance(meta.get("stats", {}), dict)
        and all(isinstance(v, list) and len(v) == 4 and all(isinstance(x, int) for x in v)
                for v in dict(meta.get("stats") or {}).values())
        and isinstance(meta.get("output_digests", {}), dict)
    )
    return meta if shapes_ok else None


def _changed_path(recorded: Mapping[str, Any], inside: str = "") -> str | None:
    """The first recorded path that is gone or changed. Inside the entry (``inside``) only the
    size counts: a copied cache has new mtimes, and content is what ``verify`` checks. Outside
    it the mtime counts, and the ctime and inode where recorded (an entry of an older cmx has
    only size and mtime)."""
    for path, (size, mtime_ns, *identity) in recorded.items():
        try:
            st = os.stat(path)
        except OSError:
            return path
        own = bool(inside) and path.startswith(inside + "/")
        moved = st.st_mtime_ns != mtime_ns or (bool(identity) and identity != [st.st_ctime_ns, st.st_ino])
        if (not own and moved) or (size and st.st_size != size):
            return path
    return None


def _pid_alive(staging_name: str) -> bool:
    parts = staging_name.split(".")
    try:
        pid = int(parts[1])
    except (IndexError, ValueError):
        return False
    import psutil  # deferred: only when staging leftovers are swept (a replayed run never does)

    return bool(psutil.pid_exists(pid))
