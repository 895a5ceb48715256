"""The persistent recipe index: one record per directory, validated by stat, so a check
never re-parses an unchanged file.

The index (``<cache>/index/recipes.v8``, stdlib ``marshal``: plain data only, no code is
ever loaded from it) keeps one record per directory, in columns: the directory's (device,
inode, mtime), its recipe file names and subdirectory names, each file's mtime, size,
recipe name, tags, variation names and load error. A directory whose stat is as recorded has the same
entries, so a check only stats its files (relative to the open directory) and compares the
mtime and size tuples with the recorded ones, in C. A directory that changed is listed
again and only the files whose (mtime, size) changed are parsed. The digests and validated
data sit in a region after the table and are read only when a recipe is built (by
:class:`cmx_core.catalog.catalog.Catalog`).

A directory modified less than ``RACY_NS`` before a check (``RACY_WHOLE_SECONDS_NS`` where
mtimes are whole seconds) is not trusted by its mtime the next time, only listed again: a
file added in the same clock tick after the listing would leave the mtime as it was. A
corrupt index is reported on stderr and rebuilt.
"""

from __future__ import annotations

import marshal
import operator
import os
import sys
import time
from functools import partial
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from cmx_core.datautil import atomic_write, read_capped
from cmx_core.errors import CmxError
from cmx_core.recipes.check import validate_recipe_data
from cmx_core.recipes.load import digest_of
from cmx_core.recipes.model import split_tags
from cmx_core.recipes.yaml_lines import MAX_FILE_BYTES, parse_yaml

# 9: a directory symlink out of the root is an entry (reported); tags and versions written as numbers refused
INDEX_FORMAT = 9  # 8: recipes checked for duplicate tags and timeouts; 7: the variation names column
SUFFIXES = (".yaml", ".yml")
#: A directory whose mtime is this close to the check (or later) is not trusted by its mtime
#: next time, only listed again: file systems stamp with a coarse clock, so an entry added in
#: the same tick, after the listing, could leave the mtime as it was. A tick is 1-10 ms where
#: mtimes have a sub-second part; where they are whole seconds (FAT: 2 s) it is up to 2 s.
RACY_NS = 100_000_000
RACY_WHOLE_SECONDS_NS = 2_000_000_000


# One directory's record in the index (a tuple; the per-file fields are columns, in file order):
_DKEY = 0      # (st_dev, st_ino, st_mtime_ns) of the directory, or None: list it again
_FILES = 1     # recipe file names, sorted (including ones whose stat failed)
_SUBDIRS = 2   # subdirectory names, sorted
_MTIMES = 3    # each file's st_mtime_ns (-1: stat failed)
_SIZES = 4     # each file's st_size (-1: stat failed)
_NAMES = 5     # each file's recipe name, None for a file that failed to load
_ERRORS = 6    # ((file index, message), ...) for the files that failed to load
_TAGS = 7      # each file's tags, comma-joined (a tag has no comma; one string unmarshals fast)
_VARIATIONS = 8  # each file's variation names in file order, comma-joined (no name has a comma)
_BOUNDS = 9    # where each file's data starts in the chunk, and where the last one ends
_OFFSET = 10   # where the chunk starts in the data region; per file: sha256 (32 bytes), marshalled data
_RECORD_LEN = 11
_DIGEST_LEN = 32
# A segment is one scanned directory: (directory, record, buffer, chunk offset in buffer).
Record = tuple[Any, ...]
"""One directory's record: the columns above (heterogeneous; checked by ``_check_record``)."""
Segment = tuple[str, Record, bytes, int]


_MAGIC = b"CMXI"
_clock = time.time_ns  # (tests set the time a check happens)
_MTIME = operator.attrgetter("st_mtime_ns")
_SIZE = operator.attrgetter("st_size")
_NAME = operator.attrgetter("name")
# Stat files relative to their open directory (no path strings to build, shorter lookups).
_DIR_FD = os.stat in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


class Index:
    """The persistent stat-validated index of parsed recipe files, one record per directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.now = _clock()  # before any stat: see RACY_NS
        self.raw = b""  # the whole index file; chunk offsets are relative to self.base
        self.base = 0
        self.dirty = False
        self.dirs: dict[str, Record] = self._read()
        self.fresh: dict[str, Segment] = {}  # what this check saw; becomes the index
        self.parsed = 0
        self._root = ""

    def _read(self) -> dict[str, Record]:
        """The table of directory records.

        File layout: ``CMXI`` + 8-byte table length + marshal(table) + the data region, so a
        check unmarshals only the small table, not 10,000 recipes' data."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()  # one read: marshal.load(fh) would read in tiny pieces
        except (FileNotFoundError, NotADirectoryError):  # (a cache dir that is a file: said when written)
            return {}
        except OSError:
            self._warn_corrupt()
            return {}
        try:
            if raw[:4] != _MAGIC:
                raise ValueError("not an index")
            size = int.from_bytes(raw[4:12], "little")
            table = marshal.loads(memoryview(raw)[12:12 + size])
            if not isinstance(table, dict) or table.get("format") != INDEX_FORMAT:
                raise ValueError("wrong format")
            dirs, region = table.get("dirs"), table.get("region")
            if type(dirs) is not dict or region != len(raw) - 12 - size:
                raise ValueError("truncated")
            for rec in dirs.values():
                _check_record(rec, region)
        except (EOFError, ValueError, TypeError):
            self._warn_corrupt()
            return {}
        self.raw, self.base = raw, 12 + size
        return dirs

    def _warn_corrupt(self) -> None:
        print(f"cmx: warning: recipe index {self.path} is corrupt; rebuilding it", file=sys.stderr)
        self.dirty = True

    def _known(self, directory: str) -> Segment | None:
        """What the index (or this check, for a directory seen twice) knows of ``directory``."""
        seen = self.fresh.get(directory)
        if seen is not None:
            return seen
        rec = self.dirs.get(directory)
        return None if rec is None else (directory, rec, self.raw, self.base + rec[_OFFSET])

    def scan(self, top: str) -> list[Segment]:
        """Every directory below ``top`` (depth first, names sorted, each directory entered
        once by device and inode, so a symlink loop ends the walk) as a segment: from the
        index when its stat and its files' stats are unchanged, else listed again and its
        changed files parsed. This is the warm path of every command."""
        segments: list[Segment] = []
        visited: set[tuple[int, int]] | None = None
        self._root = os.path.realpath(top)  # a symlink is followed only to a place below it
        stack = [top]
        while stack:
            directory = stack.pop()
            fd = None
            try:
                if _DIR_FD:
                    fd = os.open(directory, _DIR_FLAGS)
                    st = os.fstat(fd)
                else:
                    st = os.stat(directory)
            except OSError:  # vanished, not a directory, or not readable
                continue
            try:
                if visited is None:
                    visited = {(st.st_dev, st.st_ino)}
                known = self._known(directory)
                subdirs = None
                if known is not None and known[1][_DKEY] == (st.st_dev, st.st_ino, st.st_mtime_ns):
                    subdirs = _unchanged(directory, fd, known[1])
                if subdirs is None:
                    listed = self._relist(directory, st, known)
                    if listed is None:
                        continue
                    segment, subdirs = listed
                else:
                    segment = known  # type: ignore[assignment]
            finally:
                if fd is not None:
                    os.close(fd)
            old = self.dirs.get(directory)
            if segment[1] is not old:
                self.dirty = True
            self.fresh[directory] = segment
            segments.append(segment)
            children = []
            for path, key in subdirs:
                if key not in visited:
                    visited.add(key)
                    children.append(path)
            stack.extend(reversed(children))
        return segments

    def _relist(self, directory: str, st: os.stat_result, known: Segment | None
                ) -> tuple[Segment, list[tuple[str, tuple[int, int]]]] | None:
        """List ``directory`` again; reuse the known entries whose (mtime, size) is unchanged
        and parse the others. None when it cannot be listed."""
        try:
            entries = sorted(os.scandir(directory), key=_NAME)
        except OSError:
            return None
        files: list[str] = []
        stats: list[os.stat_result | OSError] = []
        subdirs: list[tuple[str, tuple[int, int]]] = []
        subdir_names: list[str] = []
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                continue
            try:
                if entry.is_dir():
                    if entry.is_symlink() and not _below(entry.path, self._root):
                        # never walked (a link to / would walk it all), but reported as a file link is:
                        # recipes behind it are not read, and the user should know
                        files.append(name)
                        stats.append(OSError(0, f"a directory symlink out of the recipe directory {self._root}; "
                                                "its recipes are not read"))
                        continue
                    s = entry.stat()
                    subdirs.append((entry.path, (s.st_dev, s.st_ino)))
                    subdir_names.append(name)
                elif name.endswith(SUFFIXES):
                    s = entry.stat()
                    files.append(name)
                    if entry.is_symlink() and not _below(entry.path, self._root):
                        stats.append(OSError(0, f"a symlink out of the recipe directory {self._root}"))
                    elif not S_ISREG(s.st_mode):  # a FIFO would block the read forever
                        stats.append(OSError(0, "not a regular file (only regular files are read as recipes)"))
                    else:
                        stats.append(s)
            except OSError as exc:
                if name.endswith(SUFFIXES):
                    files.append(name)
                    stats.append(exc)
        old_rec = known[1] if known else None
        old_files: tuple[str, ...] = old_rec[_FILES] if old_rec else ()
        old_mtimes: tuple[int, ...] = old_rec[_MTIMES] if old_rec else ()
        old_sizes: tuple[int, ...] = old_rec[_SIZES] if old_rec else ()
        old_errors = dict(old_rec[_ERRORS]) if old_rec else {}
        position = {name: j for j, name in enumerate(old_files)}
        same_chunk = old_rec is not None and tuple(files) == old_files
        mtimes: list[int] = []
        sizes: list[int] = []
        names: list[str | None] = []
        errors: list[tuple[int, str]] = []
        parts: list[int | tuple[Any, ...] | None] = []  # old index, a parsed entry, or None
        for i, (name, found) in enumerate(zip(files, stats, strict=True)):
            if not isinstance(found, os.stat_result):  # e.g. a dangling symlink: reported, never indexed
                errors.append((i, _unreadable(_join(directory, name), found)))
                mtimes.append(-1)
                sizes.append(-1)
                names.append(None)
                parts.append(None)
                same_chunk = same_chunk and old_sizes[i] == -1
                continue
            mtime, size = found.st_mtime_ns, found.st_size
            mtimes.append(mtime)
            sizes.append(size)
            j = position.get(name)
            if j is not None and old_mtimes[j] == mtime and old_sizes[j] == size:
                parts.append(j)
                names.append(old_rec[_NAMES][j])  # type: ignore[index]
                if j in old_errors:
                    errors.append((i, old_errors[j]))
            else:
                parsed = _parse(_join(directory, name))
                self.parsed += 1
                parts.append(parsed)
                names.append(parsed[0])
                if parsed[4] is not None:
                    errors.append((i, parsed[4]))
                same_chunk = False
        mtime = st.st_mtime_ns
        racy = mtime >= self.now - (RACY_NS if mtime % 1_000_000_000 else RACY_WHOLE_SECONDS_NS)
        head = (None if racy else (st.st_dev, st.st_ino, mtime), tuple(files),
                tuple(subdir_names), tuple(mtimes), tuple(sizes), tuple(names), tuple(errors))
        if same_chunk:  # the same files with the same data: only the directory's stat changed
            rec = head + old_rec[_TAGS:]  # type: ignore[index]
            if rec == old_rec:
                return known, subdirs  # type: ignore[return-value]
            return (directory, rec, known[2], known[3]), subdirs  # type: ignore[index]
        columns, chunk = _chunk(parts, known)
        return (directory, head + columns + (0,), chunk, 0), subdirs

    def file_count(self) -> int:
        """Recipe files this check indexed (those whose stat failed are not)."""
        count = 0
        for _directory, rec, _buf, _base in self.fresh.values():
            count += len(rec[_FILES])
            if rec[_ERRORS]:
                count -= rec[_SIZES].count(-1)
        return count

    def save(self) -> None:
        """Write the index atomically when anything changed (directories no longer found are
        dropped: the index becomes exactly what this check saw)."""
        if not self.dirty and self.fresh.keys() == self.dirs.keys():
            return
        region: list[bytes] = []
        offset = 0
        table: dict[str, Record] = {}
        for directory, rec, buf, base in self.fresh.values():
            length = rec[_BOUNDS][-1]
            region.append(buf[base:base + length])
            table[directory] = (*rec[:_OFFSET], offset)
            offset += length
        head = marshal.dumps({"format": INDEX_FORMAT, "region": offset, "dirs": table})
        atomic_write(self.path, _MAGIC + len(head).to_bytes(8, "little") + head + b"".join(region))


def _below(path: str, root: str) -> bool:
    """Whether ``path`` really is ``root`` or below it (its symlinks resolved)."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _unchanged(directory: str, fd: int | None, rec: Record) -> list[tuple[str, tuple[int, int]]] | None:
    """The subdirectories (path, (dev, ino)) of a directory whose own stat is as indexed,
    when its files' (mtime, size) are too (compared as tuples, in C); else None."""
    def by_path(name: str) -> os.stat_result:
        return os.stat(_join(directory, name))

    stat = partial(os.stat, dir_fd=fd) if fd is not None else by_path
    try:
        subdirs = []
        for name in rec[_SUBDIRS]:
            s = stat(name)
            if not S_ISDIR(s.st_mode):
                return None
            subdirs.append((_join(directory, name), (s.st_dev, s.st_ino)))
        stats = list(map(stat, rec[_FILES]))
    except OSError:  # e.g. a symlink that now dangles: list the directory again
        return None
    if tuple(map(_MTIME, stats)) != rec[_MTIMES] or tuple(map(_SIZE, stats)) != rec[_SIZES]:
        return None
    return subdirs


def _chunk(parts: list[int | tuple[Any, ...] | None], known: Segment | None
           ) -> tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]], bytes]:
    """A relisted directory's (tags, variations, bounds) columns and its data chunk. ``parts``
    holds, per file, an index into the known record (unchanged file), a freshly parsed entry,
    or None (the file could not be stat'ed). A file that failed to load has no data."""
    tags: list[str] = []
    variations: list[str] = []
    bounds = [0]
    blobs: list[bytes] = []
    for part in parts:
        if part is None:
            entry_tags, entry_variations, blob = "", "", b""
        elif type(part) is int:
            _directory, rec, buf, base = known  # type: ignore[misc]
            entry_tags, entry_variations = rec[_TAGS][part], rec[_VARIATIONS][part]
            blob = buf[base + rec[_BOUNDS][part]:base + rec[_BOUNDS][part + 1]]
        else:
            _name, parsed_tags, digest, data, error, parsed_variations = part  # type: ignore[misc]
            entry_tags, entry_variations = ",".join(parsed_tags), ",".join(parsed_variations)
            blob = b"" if error is not None else bytes.fromhex(digest) + data
        tags.append(entry_tags)
        variations.append(entry_variations)
        blobs.append(blob)
        bounds.append(bounds[-1] + len(blob))
    return (tuple(tags), tuple(variations), tuple(bounds)), b"".join(blobs)


def _check_record(rec: Any, region: int) -> None:
    """Raise ValueError unless ``rec`` has a directory record's shape and fits the region."""
    if type(rec) is not tuple or len(rec) != _RECORD_LEN:
        raise ValueError("bad record")
    dkey, files, subdirs, mtimes, sizes, names, errors, tags, variations, bounds, offset = rec
    n = len(files)
    if not (type(files) is tuple and type(subdirs) is tuple and type(mtimes) is tuple and type(sizes) is tuple
            and type(names) is tuple and type(errors) is tuple and type(tags) is tuple
            and type(variations) is tuple and type(bounds) is tuple and type(offset) is int
            and len(mtimes) == len(sizes) == len(names) == len(tags) == len(variations) == len(bounds) - 1 == n
            and bounds[0] == 0 and offset >= 0 and offset + bounds[-1] <= region
            and (dkey is None or (type(dkey) is tuple and len(dkey) == 3))):
        raise ValueError("bad record")
    for pair in errors:
        if type(pair) is not tuple or len(pair) != 2 or not 0 <= pair[0] < n:
            raise ValueError("bad record")


_SEPS = (os.sep, os.altsep) if os.altsep else (os.sep,)


def _join(directory: str, name: str) -> str:
    """``directory``/``name`` as ``os.scandir`` spells an entry's path (cheaper than os.path.join)."""
    return directory + name if directory.endswith(_SEPS) else directory + os.sep + name


def _unreadable(path: str, exc: OSError) -> str:
    if os.path.islink(path):
        try:
            return f"{path}: cannot read: {exc.strerror} (a symlink to {os.readlink(path)}); fix or remove the link"
        except OSError:
            pass
    return f"{path}: cannot read: {exc.strerror}"


Parsed = tuple[str | None, tuple[str, ...], str, bytes | None, str | None, tuple[str, ...]]
"""(recipe name, tags, digest, marshalled data, None, variation names), or for a file that
failed to load (None, (), digest, None, error, ())."""


def _parse(path: str) -> Parsed:
    try:
        raw = read_capped(path, MAX_FILE_BYTES)  # bounded before parse_yaml refuses a longer one
    except OSError as exc:
        return None, (), "", None, f"{path}: cannot read: {exc.strerror}", ()
    digest = digest_of(raw)
    try:
        data = parse_yaml(raw, Path(path))
        validate_recipe_data(data, Path(path))
    except CmxError as exc:
        return None, (), digest, None, str(exc), ()
    data = _plain(data)
    tags = data["tags"]
    tags = tuple(split_tags(tags) if isinstance(tags, str) else [str(t) for t in tags])
    return data["name"], tags, digest, marshal.dumps(data), None, tuple(data.get("variations") or ())


def _plain(value: Any) -> Any:
    """YAML timestamps and binary become strings so the index holds plain data only."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)  # a WrittenAsNumber (``with: {version: 3.10}``) is plain text in the index
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return str(value)
