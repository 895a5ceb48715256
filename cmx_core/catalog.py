"""The recipe catalog: where recipes are, and a persistent index that never re-parses an
unchanged file.

Sources, highest precedence first: ``--recipes`` directories, ``CMX_RECIPES_PATH``
(os.pathsep-separated), plugins' recipe paths, cmx-core's own collection. A recipe of the
same name in a higher source shadows the lower one (``cmx explain`` shows what was
shadowed).

The index (``<cache>/index/recipes.v5``, stdlib ``marshal``: plain data only, no code is
ever loaded from it) keeps one record per directory, in columns: the directory's (device,
inode, mtime), its recipe file names and subdirectory names, each file's mtime, size,
recipe name, tags and load error. A directory whose stat is as recorded has the same
entries, so a check only stats its files (relative to the open directory) and compares the
mtime and size tuples with the recorded ones, in C. A directory that changed is listed
again and only the files whose (mtime, size) changed are parsed. The digests and validated
data sit in a region after the table and are read only when a recipe is built; the
``Catalog`` works out shadowing and builds ``Listed`` items only when a query asks.

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
from collections.abc import Iterable
from functools import partial
from itertools import chain
from pathlib import Path
from stat import S_ISDIR
from typing import Any, NamedTuple

from cmx_core import paths
from cmx_core.datautil import atomic_write
from cmx_core.errors import CmxError
from cmx_core.recipe import (
    Recipe,
    digest_of,
    parse_yaml,
    recipe_from_data,
    split_tags,
    validate_recipe_data,
)

INDEX_FORMAT = 5
SUFFIXES = (".yaml", ".yml")
#: A directory whose mtime is this close to the check (or later) is not trusted by its mtime
#: next time, only listed again: file systems stamp with a coarse clock, so an entry added in
#: the same tick, after the listing, could leave the mtime as it was. A tick is 1-10 ms where
#: mtimes have a sub-second part; where they are whole seconds (FAT: 2 s) it is up to 2 s.
RACY_NS = 100_000_000
RACY_WHOLE_SECONDS_NS = 2_000_000_000


class Source(NamedTuple):
    """A directory of recipes and its label (``--recipes``, ``env``, ``plugin:NAME``, ``core``)."""

    label: str
    directory: Path


class Listed(NamedTuple):
    """A recipe known to the catalog but not built yet."""

    name: str
    tags: tuple[str, ...]
    source: str
    path: str
    digest: str
    blob: bytes | tuple[int, int]  # the marshalled data, or (offset, length) in Catalog.blobs


# One directory's record in the index (a tuple; the per-file fields are columns, in file order):
_DKEY = 0      # (st_dev, st_ino, st_mtime_ns) of the directory, or None: list it again
_FILES = 1     # recipe file names, sorted (including ones whose stat failed)
_SUBDIRS = 2   # subdirectory names, sorted
_MTIMES = 3    # each file's st_mtime_ns (-1: stat failed)
_SIZES = 4     # each file's st_size (-1: stat failed)
_NAMES = 5     # each file's recipe name, None for a file that failed to load
_ERRORS = 6    # ((file index, message), ...) for the files that failed to load
_TAGS = 7      # each file's tags, comma-joined (a tag has no comma; one string unmarshals fast)
_BOUNDS = 8    # where each file's data starts in the chunk, and where the last one ends
_OFFSET = 9    # where the chunk starts in the data region; per file: sha256 (32 bytes), marshalled data
_RECORD_LEN = 10
_DIGEST_LEN = 32
# A segment is one scanned directory: (directory, record, buffer, chunk offset in buffer).
Segment = tuple[str, tuple, bytes, int]


class Catalog:
    """The effective recipes after shadowing, with lookup by name and by tag.

    A check leaves the catalog as the scanned directories' records; who defines which name,
    the ``Listed`` items and the recipes are worked out only when asked for."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.stats: dict[str, int] = {}
        self.blobs: bytes = b""  # the index file, holding the data of the directories it had
        self._segments: list[tuple[str, str, tuple, bytes, int]] = []  # (label, *Segment)
        self._starts: list[int] = []  # each segment's first entry number
        self._sources: list[tuple[int, int, int, frozenset[int]]] = []  # segments, first entry, excluded
        self._count = 0
        self._items: dict[int, Listed] = {}
        self._where: dict[str, int] | None = None  # name -> entry number of the effective recipe
        self._names: list[str | None] = []  # per entry number (set with _where)
        self._tags: list[str] | None = None  # per entry number, comma-joined
        self._shadow: dict[str, list[int]] = {}
        self._listed: dict[str, Listed] | None = None
        self._shadowed_listed: dict[str, list[Listed]] | None = None
        self._built: dict[tuple[str, str], Recipe] = {}
        self._by_tag: dict[str, list[int]] = {}
        self._added = False

    # -- filling (load_catalog) ------------------------------------------------------------

    def add_source(self, label: str, segments: list[Segment]) -> None:
        """Append one source's scanned directories; report its load errors and names defined
        twice (first definition wins, in walk order)."""
        first_segment, start = len(self._segments), self._count
        for segment in segments:
            self._segments.append((label, *segment))
            self._starts.append(self._count)
            self._count += len(segment[1][_NAMES])
        excluded: frozenset[int] = frozenset()
        if any(seg[1][_ERRORS] for seg in segments) or \
                len(set(chain.from_iterable(seg[1][_NAMES] for seg in segments))) != self._count - start:
            excluded = frozenset(self._source_errors(first_segment, start))
        self._sources.append((first_segment, len(self._segments), start, excluded))

    def _source_errors(self, first_segment: int, start: int) -> list[int]:
        """Record the errors of one source in walk order; the entries they exclude."""
        excluded = []
        defined: dict[str, str] = {}  # name -> path within this source
        number = start
        for _label, directory, rec, _buf, _base in self._segments[first_segment:]:
            errors = dict(rec[_ERRORS])
            for i, name in enumerate(rec[_NAMES]):
                path = _join(directory, rec[_FILES][i])
                if i in errors or name in defined:
                    excluded.append(number + i)
                    self.errors[path] = errors[i] if i in errors else (
                        f"{path}: recipe name '{name}' is also defined in {defined[name]}; "
                        "names must be unique within a recipe directory")
                else:
                    defined[name] = path
            number += len(rec[_NAMES])
        return excluded

    # -- lookups ----------------------------------------------------------------------------

    def _effective(self) -> dict[str, int]:
        """Name -> entry number of the recipe that defines it (sources in precedence order);
        the shadowed definitions go to ``self._shadow``."""
        if self._where is None:
            names = self._names = list(chain.from_iterable(seg[2][_NAMES] for seg in self._segments))
            where = dict(zip(names, range(len(names))))  # in C; right when no name is defined twice
            if len(where) != len(names) or any(source[3] for source in self._sources):
                where = {}
                excluded = frozenset().union(*(source[3] for source in self._sources))
                for number, name in enumerate(names):
                    if number in excluded:
                        continue
                    if name in where:
                        self._shadow.setdefault(name, []).append(number)
                    else:
                        where[name] = number
            self._where = where
        return self._where

    def _item(self, number: int) -> Listed:
        item = self._items.get(number)
        if item is None:
            starts = self._starts  # the segment holding entry ``number``: binary search
            k, after = 0, len(starts)
            while after - k > 1:
                mid = (k + after) // 2
                if starts[mid] <= number:
                    k = mid
                else:
                    after = mid
            label, directory, rec, buf, base = self._segments[k]
            i = number - starts[k]
            lo, hi = base + rec[_BOUNDS][i] + _DIGEST_LEN, base + rec[_BOUNDS][i + 1]
            digest = buf[lo - _DIGEST_LEN:lo].hex()
            blob = (lo, hi - lo) if buf is self.blobs else buf[lo:hi]
            item = self._items[number] = _new_listed(Listed, (
                rec[_NAMES][i], tuple(rec[_TAGS][i].split(",")), label, _join(directory, rec[_FILES][i]), digest, blob))
        return item

    @property
    def listed(self) -> dict[str, Listed]:
        """Name -> the effective recipe's ``Listed``, in walk order."""
        if self._listed is None:
            self._listed = {name: self._item(number) for name, number in self._effective().items()}
        return self._listed

    @property
    def shadowed_listed(self) -> dict[str, list[Listed]]:
        """Name -> the definitions that a higher source shadows."""
        if self._shadowed_listed is None:
            self._effective()
            self._shadowed_listed = {name: [self._item(n) for n in numbers] for name, numbers in self._shadow.items()}
        return self._shadowed_listed

    def add(self, item: Listed) -> None:
        self._added = True
        if item.name in self.listed:
            self.shadowed_listed.setdefault(item.name, []).append(item)
        else:
            self.listed[item.name] = item

    def build(self, item: Listed) -> Recipe:
        key = (item.path, item.digest)
        if key not in self._built:
            blob = item.blob
            if isinstance(blob, tuple):
                offset, length = blob
                blob = self.blobs[offset:offset + length]
            try:
                data = marshal.loads(blob)
            except (EOFError, ValueError, TypeError) as exc:
                raise _corrupt_data(exc) from None
            self._built[key] = recipe_from_data(data, Path(item.path), item.digest, item.source)
        return self._built[key]

    @property
    def recipes(self) -> dict[str, Recipe]:
        """Every effective recipe, built (for listings)."""
        return {name: self.build(item) for name, item in self.listed.items()}

    @property
    def shadowed(self) -> dict[str, list[Recipe]]:
        return {name: [self.build(i) for i in items] for name, items in self.shadowed_listed.items()}

    def get(self, name: str) -> Recipe | None:
        if self._listed is not None:
            item = self._listed.get(name)
            return self.build(item) if item else None
        number = self._effective().get(name)
        return None if number is None else self.build(self._item(number))

    def with_tag(self, tag: str) -> list[Recipe]:
        """The effective recipes that have ``tag``, in walk order."""
        if self._added:  # changed by add(): answer from the listing
            return [self.build(i) for i in self._listed.values() if tag in i.tags]  # type: ignore[union-attr]
        numbers = self._by_tag.get(tag)
        if numbers is None:
            where, names = self._effective(), self._names
            if self._tags is None:
                self._tags = list(chain.from_iterable(seg[2][_TAGS] for seg in self._segments))
            numbers = self._by_tag[tag] = [  # a substring test first: cheap
                n for n, tags in enumerate(self._tags) if tag in tags and tag in tags.split(",") and where.get(names[n]) == n]
        return [self.build(self._item(n)) for n in numbers]

    def raise_errors(self) -> None:
        """A broken recipe file anywhere in the sources is an error (first one shown)."""
        if self.errors:
            first = next(iter(self.errors.values()))
            more = len(self.errors) - 1
            raise CmxError(first + (f" (and {more} more broken recipe file(s))" if more else ""))


def _corrupt_data(exc: Exception) -> CmxError:
    """A recipe's data that fails to decode (the table passed its checks): drop the index so
    the next command rebuilds it."""
    index = paths.cache_dir() / "index" / f"recipes.v{INDEX_FORMAT}"
    try:
        index.unlink()
    except OSError:
        pass
    return CmxError(f"recipe index {index} is corrupt ({exc}); it was removed, run the command again")


def core_recipes_dir() -> Path:
    """The collection shipped in the wheel (``cmx_core/recipes``) or, in a checkout, ``recipes/``."""
    here = Path(__file__).resolve().parent
    shipped = here / "recipes"
    return shipped if shipped.is_dir() else here.parent / "recipes"


def default_sources(extra_dirs: Iterable[Path] = ()) -> list[Source]:
    """All sources in precedence order (plugins are asked through the registry)."""
    sources = [Source("--recipes", Path(d)) for d in extra_dirs]
    env = os.environ.get("CMX_RECIPES_PATH", "")
    sources += [Source("CMX_RECIPES_PATH", Path(p)) for p in env.split(os.pathsep) if p]
    from cmx_core.plugins import get_registry

    sources += [Source(f"plugin:{name}", p) for name, p in get_registry().recipe_paths]
    sources.append(Source("core", core_recipes_dir()))
    return sources


def load_catalog(extra_dirs: Iterable[Path] = (), sources: list[Source] | None = None) -> Catalog:
    """Check the index against the sources, re-parse what changed, apply shadowing."""
    for directory in extra_dirs:
        if not Path(directory).is_dir():
            raise CmxError(f"--recipes {directory}: not a directory")
    sources = default_sources(extra_dirs) if sources is None else sources
    index = Index(paths.cache_dir() / "index" / f"recipes.v{INDEX_FORMAT}")
    catalog = Catalog()
    catalog.blobs = index.raw
    import gc

    enabled = gc.isenabled()
    gc.disable()  # a check allocates ~10 objects per file and creates no cycles
    try:
        for source in sources:
            catalog.add_source(source.label, index.scan(str(source.directory)))
    finally:
        if enabled:
            gc.enable()
    index.save()
    catalog.stats = {"parsed": index.parsed, "files": index.file_count()}
    return catalog


_MAGIC = b"CMXI"
_clock = time.time_ns  # (tests set the time a check happens)
_new_listed = tuple.__new__  # builds a Listed without its Python-level __new__
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
        self.dirs: dict[str, tuple] = self._read()
        self.fresh: dict[str, Segment] = {}  # what this check saw; becomes the index
        self.parsed = 0

    def _read(self) -> dict[str, tuple]:
        """The table of directory records.

        File layout: ``CMXI`` + 8-byte table length + marshal(table) + the data region, so a
        check unmarshals only the small table, not 10,000 recipes' data."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()  # one read: marshal.load(fh) would read in tiny pieces
        except FileNotFoundError:
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
                    s = entry.stat()
                    subdirs.append((entry.path, (s.st_dev, s.st_ino)))
                    subdir_names.append(name)
                elif name.endswith(SUFFIXES):
                    s = entry.stat()
                    files.append(name)
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
        for i, (name, s) in enumerate(zip(files, stats)):
            if s.__class__ is not os.stat_result:  # e.g. a dangling symlink: reported, never indexed
                errors.append((i, _unreadable(_join(directory, name), s)))  # type: ignore[arg-type]
                mtimes.append(-1)
                sizes.append(-1)
                names.append(None)
                parts.append(None)
                same_chunk = same_chunk and old_sizes[i] == -1
                continue
            mtime, size = s.st_mtime_ns, s.st_size  # type: ignore[union-attr]
            mtimes.append(mtime)
            sizes.append(size)
            j = position.get(name)
            if j is not None and old_mtimes[j] == mtime and old_sizes[j] == size:
                parts.append(j)
                names.append(old_rec[_NAMES][j])  # type: ignore[index]
                if j in old_errors:
                    errors.append((i, old_errors[j]))
            else:
                entry = _parse(_join(directory, name))
                self.parsed += 1
                parts.append(entry)
                names.append(entry[0])
                if entry[4] is not None:
                    errors.append((i, entry[4]))
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
        table: dict[str, tuple] = {}
        for directory, rec, buf, base in self.fresh.values():
            length = rec[_BOUNDS][-1]
            region.append(buf[base:base + length])
            table[directory] = rec[:_OFFSET] + (offset,)
            offset += length
        head = marshal.dumps({"format": INDEX_FORMAT, "region": offset, "dirs": table})
        atomic_write(self.path, _MAGIC + len(head).to_bytes(8, "little") + head + b"".join(region))


def _unchanged(directory: str, fd: int | None, rec: tuple) -> list[tuple[str, tuple[int, int]]] | None:
    """The subdirectories (path, (dev, ino)) of a directory whose own stat is as indexed,
    when its files' (mtime, size) are too (compared as tuples, in C); else None."""
    stat = partial(os.stat, dir_fd=fd) if fd is not None else (lambda name: os.stat(_join(directory, name)))
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
           ) -> tuple[tuple[tuple[str, ...], tuple[int, ...]], bytes]:
    """A relisted directory's (tags, bounds) columns and its data chunk. ``parts`` holds, per
    file, an index into the known record (unchanged file), a freshly parsed entry, or None (the
    file could not be stat'ed). A file that failed to load has no data."""
    tags: list[str] = []
    bounds = [0]
    blobs: list[bytes] = []
    for part in parts:
        if part is None:
            entry_tags, blob = "", b""
        elif type(part) is int:
            _directory, rec, buf, base = known  # type: ignore[misc]
            entry_tags = rec[_TAGS][part]
            blob = buf[base + rec[_BOUNDS][part]:base + rec[_BOUNDS][part + 1]]
        else:
            _name, parsed_tags, digest, data, error = part  # type: ignore[misc]
            entry_tags = ",".join(parsed_tags)
            blob = b"" if error is not None else bytes.fromhex(digest) + data
        tags.append(entry_tags)
        blobs.append(blob)
        bounds.append(bounds[-1] + len(blob))
    return (tuple(tags), tuple(bounds)), b"".join(blobs)


def _check_record(rec: Any, region: int) -> None:
    """Raise ValueError unless ``rec`` has a directory record's shape and fits the region."""
    if type(rec) is not tuple or len(rec) != _RECORD_LEN:
        raise ValueError("bad record")
    dkey, files, subdirs, mtimes, sizes, names, errors, tags, bounds, offset = rec
    n = len(files)
    if not (type(files) is tuple and type(subdirs) is tuple and type(mtimes) is tuple and type(sizes) is tuple
            and type(names) is tuple and type(errors) is tuple and type(tags) is tuple
            and type(bounds) is tuple and type(offset) is int
            and len(mtimes) == len(sizes) == len(names) == len(tags) == len(bounds) - 1 == n
            and bounds[0] == 0 and 0 <= offset and offset + bounds[-1] <= region
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


def _parse(path: str) -> tuple[str | None, tuple[str, ...], str, bytes | None, str | None]:
    """(recipe name, tags, digest, marshalled data, None) or (None, (), digest, None, error)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        return None, (), "", None, f"{path}: cannot read: {exc.strerror}"
    digest = digest_of(raw)
    try:
        data = parse_yaml(raw, Path(path))
        validate_recipe_data(data, Path(path))
    except CmxError as exc:
        return None, (), digest, None, str(exc)
    data = _plain(data)
    tags = data["tags"]
    tags = tuple(split_tags(tags) if isinstance(tags, str) else [str(t) for t in tags])
    return data["name"], tags, digest, marshal.dumps(data), None


def _plain(value: Any) -> Any:
    """YAML timestamps and binary become strings so the index holds plain data only."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
