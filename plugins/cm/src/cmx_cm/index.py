"""The collection's script index: which script a CM dep selects, by CM's own rule.

CM and cmx read dep tags differently. In CM a plain tag (``python``) must be one of the
script's tags and a ``_tag`` one of its variations; cmx accepts either for either, so a CM
dep on ``get,python`` also matches a recipe with a ``python`` variation and the plan is
ambiguous. And where several CM scripts match (``get,compiler``), CM in quiet mode takes the
first after sorting by the ``sort`` key and the path. Knowing the whole collection at import
time, the bridge picks the script CM would pick and pins the dep to it with the script's
alias, which is one of its recipe's tags.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
INPUT_RE = re.compile(r"^[a-z_][a-z0-9_]*$")


def input_name(env_key: str) -> str | None:
    """The recipe input an env key becomes (``CM_GIT_DEPTH`` -> ``cm_git_depth``), or None."""
    name = env_key.lower()
    return name if INPUT_RE.match(name) else None


def recipe_name_of(flavor: str, alias: str) -> str:
    """``cm.detect-os``: a script's recipe name, prefixed so an imported script never shadows a cmx recipe."""
    clean = re.sub(r"[^a-z0-9._-]+", "-", alias.lower()).strip("-._") or "script"
    return f"{flavor}.{clean}"


@dataclass(frozen=True)
class IndexEntry:
    """What dep selection needs of one script: tags, variation names, sort key, path, and
    env key -> input name of its recipe (so a dep's ``env`` can become ``with:`` inputs)."""

    alias: str
    tags: tuple[str, ...]
    variations: tuple[str, ...]
    sort: int
    path: str
    env_inputs: Mapping[str, str]
    deps: tuple[tuple[str, ...], ...] = ()  # the tags of its top-level deps of every kind
    dep_env: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()  # (dep tags, env keys it passes), all deps
    dep_names: tuple[str, ...] = ()  # the names of its deps of every kind (what an adr change addresses)
    adr: tuple[tuple[str, str], ...] = ()  # (dep name, the change as canonical JSON) of its variations' adr
    forced_env: tuple[tuple[str, str, bool, tuple[str, ...]], ...] = ()
    """(variation, its group, whether it is a default, the keys its ``env`` sets) of each grouped
    variation or one with an ``env``; variation "" is the script itself (its own ``env``)."""

    def forced_keys(self, variations: Sequence[str]) -> set[str]:
        """The env keys CM sets over whatever a caller passes, when the caller selects
        ``variations``: the script's own ``env`` and the ``env`` of each selected variation (a
        group's default when the caller names none of that group). Only ``default_env`` keys
        and undeclared ones take the caller's value."""
        named_groups = {group for name, group, _, _ in self.forced_env if name in variations and group}
        keys: set[str] = set()
        for name, group, default, names in self.forced_env:
            if name == "" or name in variations or (default and group and group not in named_groups):
                keys.update(names)
        return keys

    def has_variation(self, tag: str) -> bool:
        """CM's test: the name itself, or a parametric ``stem.#`` whose stem starts it."""
        if tag in self.variations:
            return True
        return any(v.endswith(".#") and tag.startswith(v[:-1]) and not tag.endswith(".") for v in self.variations)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"env_inputs": dict(self.env_inputs)}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> IndexEntry:
        return IndexEntry(alias=str(data["alias"]), tags=tuple(data["tags"]), variations=tuple(data["variations"]),
                          sort=int(data["sort"]), path=str(data["path"]), env_inputs=dict(data["env_inputs"]),
                          deps=tuple(tuple(d) for d in data.get("deps", ())),
                          dep_env=tuple((tuple(t), tuple(k)) for t, k in data.get("dep_env", ())),
                          dep_names=tuple(data.get("dep_names", ())),
                          adr=tuple((str(n), str(c)) for n, c in data.get("adr", ())),
                          forced_env=tuple((str(v), str(g), bool(d), tuple(str(k) for k in keys))
                                           for v, g, d, keys in data.get("forced_env", ())))


@dataclass(frozen=True)
class DepQuery:
    """A CM dep's tags split as CM splits them."""

    plain: tuple[str, ...]
    variations: tuple[str, ...]
    excluded: tuple[str, ...] = ()
    excluded_variations: tuple[str, ...] = ()


class ScriptIndex:
    """Every script of one collection, and CM's selection over them."""

    def __init__(self, entries: Iterable[IndexEntry]) -> None:
        self.entries = tuple(sorted(entries, key=lambda e: (e.sort, e.path)))
        counts: Counter[str] = Counter()
        for entry in self.entries:
            counts.update({*entry.tags, entry.alias, *(v.removesuffix(".#") for v in entry.variations)})
        self._counts = counts
        self._passed: dict[str, set[str]] | None = None
        self.adr: dict[str, dict[str, str]] = {}  # dep name -> change id -> the change (JSON), collection-wide
        for entry in self.entries:
            for name, change in entry.adr:
                self.adr.setdefault(name, {})[change_id(change)] = change
        self._adr_reach: dict[str, bool] = {}

    @property
    def passed(self) -> dict[str, set[str]]:
        """alias -> the env keys its dependents pass it; worked out on first use, since
        ``cmx cm run script`` only selects (a select per dep of every script)."""
        if self._passed is None:
            self._passed = {}
            for entry in self.entries:
                for tags, keys in entry.dep_env:
                    found = self.select(split_tags(tags))
                    if found:
                        self._passed.setdefault(found[0].alias, set()).update(keys)
        return self._passed

    def recursive_changes(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        """Every change some script's variation makes through ``adr`` to deps named ``name``
        (id, change), in a stable order: a dep of that name takes the one its callers pass."""
        return [(key, json.loads(change)) for key, change in sorted(self.adr.get(name, {}).items())]

    def passes_adr(self, start: IndexEntry) -> bool:
        """Whether ``start`` or a script below it has a dep some ``adr`` of the collection
        changes: only then does a dep on it carry its callers' ``add_deps_recursive``."""
        if not self._adr_reach and self.adr:
            below = {e.alias: {f[0].alias for f in (self.select(split_tags(t)) for t in e.deps) if f}
                     for e in self.entries}
            reach = {e.alias: any(n in self.adr for n in e.dep_names) for e in self.entries}
            changed = True
            while changed:  # a fixed point: cycles among scripts are common in CM collections
                changed = False
                for alias, targets in below.items():
                    if not reach[alias] and any(reach.get(t) for t in targets):
                        reach[alias] = changed = True
            self._adr_reach = reach
        return self._adr_reach.get(start.alias, False)

    def extra_inputs(self, entry: IndexEntry) -> dict[str, str]:
        """env key -> input name for the keys other scripts pass this one in a dep's ``env``
        that its own metadata does not declare (its scripts read them all the same)."""
        taken = set(entry.env_inputs.values())
        out: dict[str, str] = {}
        for key in sorted(self.passed.get(entry.alias, ())):
            name = key.lower()
            if key not in entry.env_inputs and INPUT_RE.match(name) and name not in taken:
                out[key] = name
                taken.add(name)
        return out

    def inputs_of(self, entry: IndexEntry) -> dict[str, str]:
        """Every env key -> input name of the script's recipe."""
        return {**entry.env_inputs, **self.extra_inputs(entry)}

    def select(self, query: DepQuery) -> list[IndexEntry]:
        """The scripts CM finds for the dep, in the order CM tries them (first wins in quiet mode)."""
        found = []
        for entry in self.entries:
            tags = set(entry.tags)
            if not set(query.plain) <= tags or tags & set(query.excluded):
                continue
            if not all(entry.has_variation(v) for v in query.variations):
                continue
            if any(v in entry.variations for v in query.excluded_variations):
                continue
            found.append(entry)
        return found

    def reaches(self, start: IndexEntry, alias: str) -> bool:
        """Whether ``start`` depends, directly or through the scripts CM selects for its deps
        (conditions not considered), on the script ``alias``."""
        seen: set[str] = set()
        stack = [start]
        while stack:
            entry = stack.pop()
            if entry.alias == alias:
                return True
            if entry.alias in seen:
                continue
            seen.add(entry.alias)
            for tags in entry.deps:
                found = self.select(split_tags(tags))
                if found:
                    stack.append(found[0])
        return False

    def pins(self, entry: IndexEntry) -> bool:
        """Whether the alias names this script alone among every tag and variation of the collection."""
        return self._counts[entry.alias] == 1 and TAG_RE.match(entry.alias) is not None

    def digest(self) -> str:
        """Changes when any script's selection data does: the live path re-translates all then."""
        text = json.dumps([e.to_json() for e in self.entries], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def split_tags(tags: Sequence[str]) -> DepQuery:
    """``get,python3,_pip,-tmp,-_cuda`` -> plain, variations, excluded, excluded variations."""
    plain: list[str] = []
    variations: list[str] = []
    excluded: list[str] = []
    excluded_variations: list[str] = []
    for tag in tags:
        if tag.startswith("-_"):
            excluded_variations.append(tag[2:])
        elif tag.startswith("-"):
            excluded.append(tag[1:])
        elif tag.startswith("_"):
            variations.append(tag[1:])
        else:
            plain.append(tag)
    return DepQuery(tuple(plain), tuple(variations), tuple(excluded), tuple(excluded_variations))


def change_id(change: str) -> str:
    """A short, stable name of one ``adr`` change (its canonical JSON)."""
    return hashlib.sha256(change.encode()).hexdigest()[:10]
