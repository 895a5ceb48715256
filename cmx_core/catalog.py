"""The recipe catalog: where recipes are, and a persistent index that never re-parses an
unchanged file.

Sources, highest precedence first: ``--recipes`` directories, ``CMX_RECIPES_PATH``
(os.pathsep-separated), plugins' recipe paths, cmx-core's own collection. A recipe of the
same name in a higher source shadows the lower one (``cmx explain`` shows what was
shadowed). The index (``<cache>/index/recipes.v4``, stdlib ``marshal``: plain data only,
no code is ever loaded from it) maps each file to its (mtime_ns, size) and validated data;
a check walks the directories with ``os.scandir`` and re-parses only files whose stat
changed. A corrupt index is reported on stderr and rebuilt.
"""

from __future__ import annotations

import marshal
import operator
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
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

INDEX_FORMAT = 4
SUFFIXES = (".yaml", ".yml")


class Source(NamedTuple):
    """A directory of recipes and its label (``--recipes``, ``env``, ``plugin:NAME``, ``core``)."""

    label: str
    directory: Path


@dataclass
class Entry:
    """One indexed file: stat, digest, name and tags, and the validated data as a marshal
    blob (decoded only when the recipe is needed) or the load error."""

    mtime_ns: int
    size: int
    digest: str
    name: str
    tags: tuple[str, ...]
    blob: bytes | None
    error: str | None

    def pack(self) -> list[Any]:
        return [self.mtime_ns, self.size, self.digest, self.name, self.tags, self.blob, self.error]


class Listed(NamedTuple):
    """A recipe known to the catalog but not built yet (a tuple: 10,000 are made per check)."""

    name: str
    tags: tuple[str, ...]
    source: str
    path: str
    digest: str
    blob: bytes | tuple[int, int]  # the marshalled data, or (offset, length) in the index file


class Catalog:
    """The effective recipes after shadowing, with lookup by name and by tag. Recipes are
    built from the index only when asked for."""

    def __init__(self) -> None:
        self.listed: dict[str, Listed] = {}
        self.shadowed_listed: dict[str, list[Listed]] = {}
        self.errors: dict[str, str] = {}
        self.stats: dict[str, int] = {}
        self._built: dict[tuple[str, str], Recipe] = {}
        self._by_tag: dict[str, list[str]] | None = None
        self.blobs: bytes = b""  # the index file's data region (see Index)

    def add(self, item: Listed) -> None:
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
            data = marshal.loads(blob)
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
        item = self.listed.get(name)
        return self.build(item) if item else None

    def with_tag(self, tag: str) -> list[Recipe]:
        if self._by_tag is None:
            index: dict[str, list[str]] = {}
            for item in self.listed.values():
                for t in item.tags:
                    index.setdefault(t, []).append(item.name)
            self._by_tag = index
        return [self.build(self.listed[n]) for n in self._by_tag.get(tag, [])]

    def raise_errors(self) -> None:
        """A broken recipe file anywhere in the sources is an error (first one shown)."""
        if self.errors:
            first = next(iter(self.errors.values()))
            more = len(self.errors) - 1
            raise CmxError(first + (f" (and {more} more broken recipe file(s))" if more else ""))


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
    catalog.blobs = index.blobs
    import gc

    enabled = gc.isenabled()
    gc.disable()  # the scan allocates ~10 objects per file and creates no cycles
    try:
        for source in sources:
            index.scan_into(catalog, source)
    finally:
        if enabled:
            gc.enable()
    index.save()
    catalog.stats = {"parsed": index.parsed, "files": len(index.fresh)}
    return catalog


_MAGIC = b"CMXI"
_new_listed = tuple.__new__  # builds a Listed without its Python-level __new__ (10,000 per check)


class Index:
    """The persistent stat-validated index of parsed recipe files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.blobs = b""
        self.entries: dict[str, list[Any]] = self._read()
        self.fresh: dict[str, list[Any]] = {}  # what this check saw; becomes the index
        self.parsed = 0
        self.dirty = False

    def _read(self) -> dict[str, list[Any]]:
        """The table of entries; each entry's data stays in ``self.blobs`` as (offset, length).

        File layout: ``CMXI`` + 8-byte table length + marshal(table) + the data region, so a
        check unmarshals only the small table, not 10,000 recipes' data."""
        self.blobs = b""
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
            table = marshal.loads(raw[12:12 + size])
            if not isinstance(table, dict) or table.get("format") != INDEX_FORMAT or not isinstance(table.get("files"), dict):
                raise ValueError("wrong format")
        except (EOFError, ValueError, TypeError):
            self._warn_corrupt()
            return {}
        self.blobs = raw[12 + size:]
        return table["files"]

    def _warn_corrupt(self) -> None:
        print(f"cmx: warning: recipe index {self.path} is corrupt; rebuilding it", file=sys.stderr)
        self.dirty = True

    def scan_into(self, catalog: Catalog, source: Source) -> None:
        """Add every recipe file under ``source`` to ``catalog``: unchanged files (same mtime
        and size) straight from the index, the others parsed. One loop on purpose: this is the
        warm path of every command."""
        label = source.label
        defined: dict[str, str] = {}  # name -> path within this source directory
        entries, fresh, listed, errors = self.entries, self.fresh, catalog.listed, catalog.errors
        for path, stat in _walk(str(source.directory)):
            if stat.__class__ is not os.stat_result:  # e.g. a dangling symlink: reported, never indexed
                errors[path] = _unreadable(path, stat)  # type: ignore[arg-type]
                continue
            packed = entries.get(path)
            if packed is None or packed[0] != stat.st_mtime_ns or packed[1] != stat.st_size:
                packed = _parse(Path(path), stat).pack()
                self.parsed += 1
                self.dirty = True
            fresh[path] = packed
            name = packed[3]
            if packed[6] is not None or packed[5] is None:
                errors[path] = packed[6] or f"{path}: unreadable index entry"
            elif name in defined:
                errors[path] = (f"{path}: recipe name '{name}' is also defined in {defined[name]}; "
                                "names must be unique within a recipe directory")
            else:
                defined[name] = path
                item = _new_listed(Listed, (name, packed[4], label, path, packed[2], packed[5]))
                if name in listed:
                    catalog.shadowed_listed.setdefault(name, []).append(item)
                else:
                    listed[name] = item

    def save(self) -> None:
        """Write the index atomically when anything changed (files no longer found are
        dropped: the index becomes exactly what this check saw)."""
        if not self.dirty and len(self.fresh) == len(self.entries):
            return  # nothing parsed and nothing gone (every fresh path was an old entry)
        region: list[bytes] = []
        offset = 0
        table: dict[str, list[Any]] = {}
        for path, packed in self.fresh.items():
            blob = packed[5]
            if isinstance(blob, tuple):
                blob = self.blobs[blob[0]:blob[0] + blob[1]]
            if blob is not None:
                region.append(blob)
                packed = [*packed[:5], (offset, len(blob)), packed[6]]
                offset += len(blob)
            table[path] = packed
        head = marshal.dumps({"format": INDEX_FORMAT, "files": table})
        atomic_write(self.path, _MAGIC + len(head).to_bytes(8, "little") + head + b"".join(region))


def _walk(top: str) -> list[tuple[str, os.stat_result | OSError]]:
    """Recipe files below ``top`` with their stat (or the OSError that stat raised, e.g. for
    a dangling symlink), depth first, names sorted. Symlinked directories are followed, but
    each directory (by device and inode) is entered once, so a link loop ends the walk."""
    found: list[tuple[str, os.stat_result | OSError]] = []
    try:
        top_stat = os.stat(top)
    except OSError:
        return found
    visited = {(top_stat.st_dev, top_stat.st_ino)}
    stack = [top]
    while stack:
        try:
            entries = sorted(os.scandir(stack.pop()), key=_NAME)
        except OSError:  # vanished, not a directory, or not readable
            continue
        subdirs = []
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                continue
            try:
                if entry.is_dir():
                    stat = entry.stat()
                    if (stat.st_dev, stat.st_ino) not in visited:
                        visited.add((stat.st_dev, stat.st_ino))
                        subdirs.append(entry.path)
                elif name.endswith(SUFFIXES):
                    found.append((entry.path, entry.stat()))
            except OSError as exc:
                if name.endswith(SUFFIXES):
                    found.append((entry.path, exc))
        stack.extend(reversed(subdirs))
    return found


def _unreadable(path: str, exc: OSError) -> str:
    if os.path.islink(path):
        try:
            return f"{path}: cannot read: {exc.strerror} (a symlink to {os.readlink(path)}); fix or remove the link"
        except OSError:
            pass
    return f"{path}: cannot read: {exc.strerror}"


_NAME = operator.attrgetter("name")


def _parse(path: Path, stat: os.stat_result) -> Entry:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return Entry(stat.st_mtime_ns, stat.st_size, "", "", [], None, f"{path}: cannot read: {exc.strerror}")
    digest = digest_of(raw)
    try:
        data = parse_yaml(raw, path)
        validate_recipe_data(data, path)
    except CmxError as exc:
        return Entry(stat.st_mtime_ns, stat.st_size, digest, "", [], None, str(exc))
    data = _plain(data)
    tags = data["tags"]
    tags = tuple(split_tags(tags) if isinstance(tags, str) else [str(t) for t in tags])
    return Entry(stat.st_mtime_ns, stat.st_size, digest, data["name"], tags, marshal.dumps(data), None)


def _plain(value: Any) -> Any:
    """YAML timestamps and binary become strings so the index holds plain data only."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
