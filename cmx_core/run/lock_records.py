"""The lockfile as typed records: what ``lock.json`` holds, read and written as a dict only
at the file's edge (:meth:`Lock.from_json` after the shape is checked, :meth:`Lock.to_json`
when it is written). The drift check (:mod:`cmx_core.run.lock`) compares these records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class LockQuery:
    """The query a lock replays: its tags and inputs, where recipes and facts came from."""

    tags: tuple[str, ...]
    inputs: Mapping[str, Any]
    recipes_dirs: tuple[str, ...] = ()
    facts_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"tags": list(self.tags), "inputs": dict(self.inputs), "recipes_dirs": list(self.recipes_dirs),
                "facts_file": self.facts_file}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LockQuery:
        return cls(tuple(doc["tags"]), dict(doc.get("inputs") or {}), tuple(doc.get("recipes_dirs") or ()),
                   doc.get("facts_file"))


@dataclass(frozen=True)
class LockNode:
    """One resolved node: its recipe (name, version, digest, file and text), variations,
    inputs, cache key, step versions and the facts it used. A field a hand-written lock
    leaves out is None."""

    id: str
    recipe: str | None = None
    version: str | None = None
    digest: str | None = None
    source: str | None = None
    variations: Mapping[str, Any] | None = None
    inputs: Mapping[str, Any] | None = None
    cache_key: str | None = None
    steps: Mapping[str, Any] | None = None
    facts_used: Mapping[str, Any] | None = None
    recipe_text: str | None = None

    def value_of(self, name: str) -> Any:
        """The value of the field ``name`` (the drift check walks fields by name)."""
        return getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LockNode:
        values: dict[str, Any] = {f.name: doc.get(f.name) for f in fields(cls)}
        return cls(**values)


@dataclass(frozen=True)
class LockPlugin:
    """A loaded plugin: its distribution and version, and whether the plan used it."""

    distribution: str
    version: str | None
    name: str | None = None
    used: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version, "used": self.used}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LockPlugin:
        return cls(doc["distribution"], doc["version"], doc.get("name"), doc.get("used", True))


@dataclass(frozen=True)
class LockRepo:
    """An added recipe repository at the commit the run used."""

    name: str
    commit: str
    url: str | None = None
    kind: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "commit": self.commit, "kind": self.kind}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LockRepo:
        return cls(doc["name"], doc["commit"], doc.get("url"), doc.get("kind"))


@dataclass(frozen=True)
class Lock:
    """A run's ``lock.json``."""

    query: LockQuery
    nodes: tuple[LockNode, ...]
    plugins: tuple[LockPlugin, ...] = ()
    repos: tuple[LockRepo, ...] = ()
    cmx_version: str | None = None
    facts_source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cmx_version": self.cmx_version,
            "query": self.query.to_json(),
            "facts_source": self.facts_source,
            "nodes": [n.to_json() for n in self.nodes],
            "plugins": [p.to_json() for p in self.plugins],
            "repos": [r.to_json() for r in self.repos],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Lock:
        """The record of a lock document whose shape is already checked (:data:`~cmx_core.run.lock.LOCK_SHAPE`)."""
        return cls(LockQuery.from_json(doc["query"]), tuple(LockNode.from_json(n) for n in doc["nodes"]),
                   tuple(LockPlugin.from_json(p) for p in doc.get("plugins") or ()),
                   tuple(LockRepo.from_json(r) for r in doc.get("repos") or ()),
                   doc.get("cmx_version"), doc.get("facts_source"))
