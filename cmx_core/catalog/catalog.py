"""The recipe catalog: where recipes are, and the effective recipes after shadowing.

Sources, highest precedence first: ``--recipes`` directories, ``CMX_RECIPES_PATH``
(os.pathsep-separated), added recipe repositories and plugins' recipe paths (both handed in
by the caller), cmx-core's own collection. A recipe of the same name in a higher source shadows the lower one (``cmx
explain`` shows what was shadowed). Each source is scanned through the persistent index of
:mod:`cmx_core.catalog.index`, which never re-parses an unchanged file; the ``Catalog``
works out shadowing and builds ``Listed`` items and recipes only when a query asks.
"""

from __future__ import annotations

import gc
import marshal
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from cmx_core import paths, reads
from cmx_core.catalog.index import (
    _BOUNDS,
    _DIGEST_LEN,
    _ERRORS,
    _FILES,
    _NAMES,
    _TAGS,
    _VARIATIONS,
    INDEX_FORMAT,
    RACY_NS,
    RACY_WHOLE_SECONDS_NS,
    SUFFIXES,
    Index,
    Record,
    Segment,
    _join,
)
from cmx_core.errors import CmxError, UsageError, escape_controls
from cmx_core.recipes.model import Recipe, recipe_from_data

if TYPE_CHECKING:
    from cmx_core.catalog.scan import RecipeScan

__all__ = [
    "INDEX_FORMAT", "RACY_NS", "RACY_WHOLE_SECONDS_NS", "SUFFIXES", "Catalog", "Index", "Listed",
    "PluginRecipePaths", "Source", "core_recipes_dir", "default_sources", "load_catalog",
]

_new_listed = tuple.__new__  # builds a Listed without its Python-level __new__

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
    variations: tuple[str, ...] = ()  # the variation names, in file order


class Catalog:
    """The effective recipes after shadowing, with lookup by name and by tag.

    A check leaves the catalog as the scanned directories' records; who defines which name,
    the ``Listed`` items and the recipes are worked out only when asked for."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.origins: Mapping[str, str] = {}
        """Where the files of a source directory come from, for messages (a recipe repository's
        cached tree -> the user's checkout or URL): set before the sources are added."""
        self.ambiguous: list[str] = []  # a name defined twice in one source: which one runs is unclear
        self._warned = False
        self.stats: dict[str, int] = {}
        self.blobs: bytes = b""  # the index file, holding the data of the directories it had
        self._segments: list[tuple[str, str, Record, bytes, int]] = []  # (label, *Segment)
        self._starts: list[int] = []  # each segment's first entry number
        self._sources: list[tuple[int, int, int, frozenset[int]]] = []  # segments, first entry, excluded
        self._count = 0
        self._items: dict[int, Listed] = {}
        self._where: dict[str, int] | None = None  # name -> entry number of the effective recipe
        self._names: list[str] = []  # per entry number (set with _where)
        self._tags: list[str] | None = None  # per entry number, comma-joined
        self._shadow: dict[str, list[int]] = {}
        self._listed: dict[str, Listed] | None = None
        self._shadowed_listed: dict[str, list[Listed]] | None = None
        self._built: dict[tuple[str, str], Recipe] = {}
        self.scans: dict[int, RecipeScan] = {}
        """The resolver's per-recipe scans of the recipes built here (id -> scan): they live
        as long as the recipes do (:mod:`cmx_core.catalog.scan`)."""
        self.selections: dict[tuple[bool, tuple[str, ...]], Any] = {}
        """The resolver's candidates per query ((every candidate?, tags) -> its selection);
        :meth:`add` clears them."""
        self._by_tag: dict[str, list[int]] = {}
        self._by_variation: dict[str, list[int]] = {}  # variation name (``bs.#`` for a parametric one)
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
                    self.errors[path] = self._shown(errors[i]) if i in errors else (
                        f"{path}: recipe name '{name}' is also defined in {defined[name]}; "
                        "names must be unique within a recipe directory")
                    if i not in errors and os.path.realpath(path) != os.path.realpath(defined[name]):
                        self.ambiguous.append(self.errors[path])  # a link to the same file is not ambiguous
                else:
                    defined[name] = path
            number += len(rec[_NAMES])
        return excluded

    def _shown(self, message: str) -> str:
        """``message`` naming the user's file rather than the cached copy (:attr:`origins`)."""
        for root, origin in self.origins.items():
            message = message.replace(root + os.sep, origin + os.sep)
        return message

    # -- lookups ----------------------------------------------------------------------------

    def _effective(self) -> dict[str, int]:
        """Name -> entry number of the recipe that defines it (sources in precedence order);
        the shadowed definitions go to ``self._shadow``."""
        if self._where is None:
            # A file that failed to load has the name None; its entry is excluded below.
            names = self._names = cast("list[str]", list(chain.from_iterable(seg[2][_NAMES] for seg in self._segments)))
            where = dict(zip(names, range(len(names)), strict=True))  # in C; right when no name is defined twice
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
            variations = rec[_VARIATIONS][i]
            item = self._items[number] = _new_listed(Listed, (
                rec[_NAMES][i], tuple(rec[_TAGS][i].split(",")), label, _join(directory, rec[_FILES][i]), digest, blob,
                tuple(variations.split(",")) if variations else ()))
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
        self.selections.clear()
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
        return [self.build(item) for item in self.listed_with_tag(tag)]

    def listed_with_tag(self, tag: str) -> list[Listed]:
        """The effective recipes that have ``tag``, in walk order, not built."""
        if self._added:  # changed by add(): answer from the listing
            return [i for i in self._listed.values() if tag in i.tags]  # type: ignore[union-attr]
        return [self._item(n) for n in self._postings()[0].get(tag, ())]

    def candidates(self, tags: Sequence[str]) -> list[Listed]:
        """The recipes that every one of ``tags`` can select (as a tag or a variation), in walk
        order, not built: the rarest tag's posting list, each entry kept only when the other
        tags select it too (a check of its own tags and variation names). The cost grows with
        the rarest tag's recipes, not with how many recipes share a common tag."""
        if not tags:
            return []
        if self._added:
            return [i for i in self._listed.values() if all(_selects(t, i) for t in tags)]  # type: ignore[union-attr]
        unique = list(dict.fromkeys(tags))
        rarest = min(unique, key=self._posting_size)
        others = [t for t in unique if t != rarest]
        items = (self._item(number) for number in self._posting(rarest))
        return [item for item in items if all(_selects(t, item) for t in others)]

    def _posting_size(self, tag: str) -> int:
        """How many entries ``tag`` can select, at most (its tag and variation lists' lengths)."""
        by_tag, by_variation = self._postings()
        stem, _, value = tag.partition(".")
        return (len(by_tag.get(tag, ())) + len(by_variation.get(tag, ()))
                + (len(by_variation.get(f"{stem}.#", ())) if stem and value else 0))

    def _posting(self, tag: str) -> list[int]:
        """Entry numbers ``tag`` can select, in walk order (a tag, a variation, a parametric stem)."""
        by_tag, by_variation = self._postings()
        lists = [by_tag.get(tag, ())]
        if not tag.endswith(".#"):
            lists.append(by_variation.get(tag, ()))
        stem, _, value = tag.partition(".")
        if stem and value:
            lists.append(by_variation.get(f"{stem}.#", ()))
        lists = [posting for posting in lists if posting]
        if len(lists) <= 1:
            return list(lists[0]) if lists else []
        return sorted(set().union(*lists))

    def _postings(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        """Tag -> entry numbers of the effective recipes that have it, and variation name ->
        the same, in walk order: one pass over the index's tag and variation columns the
        first time any tag is asked for, so each later lookup is a dict access, not a scan of
        the whole collection."""
        if self._tags is None:
            where, names = self._effective(), self._names
            self._tags = list(chain.from_iterable(seg[2][_TAGS] for seg in self._segments))
            variations = list(chain.from_iterable(seg[2][_VARIATIONS] for seg in self._segments))
            for column, postings in ((self._tags, self._by_tag), (variations, self._by_variation)):
                for number, joined in enumerate(column):
                    if not joined or where.get(names[number]) != number:  # shadowed, duplicate or broken
                        continue
                    for key in joined.split(","):
                        numbers = postings.get(key)
                        if numbers is None:
                            postings[key] = [number]
                        elif numbers[-1] != number:  # a tag listed twice counts once
                            numbers.append(number)
        return self._by_tag, self._by_variation

    def raise_errors(self) -> None:
        """A broken recipe file anywhere in the sources is an error (first one shown)."""
        if self.errors:
            raise UsageError(self.errors_line())

    def raise_ambiguous(self) -> None:
        """Two recipes of one name in one source are an error even without ``--strict``:
        taking either of them would run a recipe the user may not have meant."""
        if self.ambiguous:
            more = len(self.ambiguous) - 1
            raise UsageError(self.ambiguous[0] + (f" (and {more} more name(s) defined twice)" if more else ""))

    def errors_line(self) -> str:
        first = next(iter(self.errors.values()))
        more = len(self.errors) - 1
        return first + (f" (and {more} more broken recipe file(s))" if more else "")

    def warn_errors(self) -> None:
        """Each broken recipe file as one warning on stderr: the commands that do not need
        it keep working (a broken plugin is isolated the same way)."""
        if self._warned:
            return
        self._warned = True
        for message in self.errors.values():
            print(f"cmx: warning: skipped a broken recipe file: {escape_controls(message)} "
                  "(--strict makes this an error)", file=sys.stderr)


def _selects(tag: str, item: Listed) -> bool:
    """Whether ``tag`` is one of the item's tags or selects one of its variations."""
    if tag in item.tags:
        return True
    variations = item.variations
    if tag in variations and not tag.endswith(".#"):
        return True
    stem, _, value = tag.partition(".")
    return bool(stem and value and f"{stem}.#" in variations)


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
    """The collection shipped in the wheel (``cmx_core/collection``) or, in a checkout, ``recipes/``."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "collection"
    reads.file(shipped)  # if it appears or goes, the core collection moves
    return shipped if shipped.is_dir() else package.parent / "recipes"


PluginRecipePaths = Sequence[tuple[str, Path]]
"""(plugin name, recipe directory) pairs, as ``Registry.recipe_paths`` gives them."""


def default_sources(extra_dirs: Iterable[Path], plugin_paths: PluginRecipePaths,
                    repo_paths: Sequence[tuple[str, Path]] = ()) -> list[Source]:
    """All sources in precedence order: ``--recipes``, ``CMX_RECIPES_PATH``, the added
    recipe repositories (``repo_paths``: (``repo:NAME``, directory) at their pinned
    commits), the plugins' recipe directories (``plugin_paths``, i.e.
    ``registry.recipe_paths``), the core collection."""
    sources = [Source("--recipes", Path(d)) for d in extra_dirs]
    reads.env("CMX_RECIPES_PATH")
    env = os.environ.get("CMX_RECIPES_PATH", "")
    for entry in env.split(os.pathsep):
        if entry:
            reads.link(entry)
            _warn_missing(entry)
            sources.append(Source("CMX_RECIPES_PATH", Path(entry)))
    sources += [Source(label, Path(p)) for label, p in repo_paths]
    sources += [Source(f"plugin:{name}", Path(p)) for name, p in plugin_paths]
    sources.append(Source("core", core_recipes_dir()))
    return sources


_WARNED: set[str] = set()


def _warn_missing(entry: str) -> None:
    """A ``CMX_RECIPES_PATH`` entry that is no directory (a typo, an unmounted disk) is named
    once per process: like ``PATH``, the variable stays lenient, but never silently."""
    if entry not in _WARNED and not os.path.isdir(entry):
        _WARNED.add(entry)
        print(f"cmx: warning: CMX_RECIPES_PATH entry {escape_controls(entry)} is not a directory; "
              "no recipes are read from it (fix or remove it)", file=sys.stderr)


def load_catalog(extra_dirs: Iterable[Path] = (), sources: list[Source] | None = None,
                 plugin_paths: PluginRecipePaths | None = None,
                 repo_paths: Sequence[tuple[str, Path]] = (), origins: Mapping[str, str] | None = None) -> Catalog:
    """Check the index against the sources, re-parse what changed, apply shadowing.

    ``sources`` replaces the default sources altogether; otherwise they are
    :func:`default_sources` of ``extra_dirs`` and ``plugin_paths``. ``origins``: where the
    files of a source directory come from, which messages name (:attr:`Catalog.origins`)."""
    for directory in extra_dirs:
        if not Path(directory).is_dir():
            raise CmxError(f"--recipes {directory}: not a directory")
    if sources is None:
        if plugin_paths is None:
            raise TypeError("load_catalog needs plugin_paths (registry.recipe_paths) or sources")
        sources = default_sources(extra_dirs, plugin_paths, repo_paths)
    index = Index(paths.cache_dir() / "index" / f"recipes.v{INDEX_FORMAT}")
    catalog = Catalog()
    catalog.blobs = index.raw
    catalog.origins = dict(origins or {})

    enabled = gc.isenabled()
    gc.disable()  # a check allocates ~10 objects per file and creates no cycles
    try:
        for source in sources:
            catalog.add_source(source.label, index.scan(str(source.directory)))
            reads.tree(source.directory, SUFFIXES)  # what resolves depends on every file there
    finally:
        if enabled:
            gc.enable()
    index.save()
    catalog.stats = {"parsed": index.parsed, "files": index.file_count()}
    return catalog
