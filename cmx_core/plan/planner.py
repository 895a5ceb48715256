"""The plan: the resolved DAG in topological order, each node with its cache key.

The key hashes everything that can change a node's outputs: the recipe's content digest,
its typed inputs, its variations, the keys of its deps, the facts it read and the versions
of the step types it uses. ``key_parts`` keeps each part's digest so ``cmx explain`` can say
which part changed on a miss. A node whose deps include an uncached node gets that dep's
actual outputs folded into its key at run time (``volatile``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from hashlib import sha256
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, NamedTuple

from cmx_core import __version__, reads
from cmx_core.cache.store import Cache
from cmx_core.recipes.model import Recipe, StepSpec
from cmx_core.resolve.decision import Decision
from cmx_core.resolve.resolver import Resolution, ResolvedNode, paused_gc

KEY_FORMAT = 1

StepDetail = Callable[["PlanNode", StepSpec], list[str]]
"""Extra lines :meth:`Plan.render_tree` shows under a step (``cmx plan``'s rendered settings)."""


class PlanQuery(NamedTuple):
    tags: tuple[str, ...]
    inputs: Mapping[str, str]
    recipes_dirs: tuple[Path, ...] = ()


class PlanNode(NamedTuple):
    """One node as it will run."""

    id: str
    recipe: Recipe
    variations: Mapping[str, Any]
    inputs: Mapping[str, Any]
    deps: Mapping[str, str]
    steps: tuple[StepSpec, ...]
    cache_key: str
    key_parts: Mapping[str, str]
    key_values: Mapping[str, Any]
    requires: Mapping[str, Any]
    facts_used: Mapping[str, Any]
    step_versions: Mapping[str, str]
    container: str | None
    volatile: tuple[str, ...] = ()
    cache_status: str = "disabled"
    cache_reason: str = ""
    measures: bool = False
    """A step of this node is a measurement (its recipe says so, or its step type)."""

    @property
    def recipe_name(self) -> str:
        return self.recipe.name

    @property
    def cacheable(self) -> bool:
        """Cached when the recipe is, unless the node measures and the recipe did not ask
        for cached measurements (``cache: {measurements: true}``)."""
        return _cacheable(self.recipe, self.measures)


class Plan(NamedTuple):
    query: PlanQuery
    nodes: tuple[PlanNode, ...]
    facts_source: str
    facts_file: Path | None
    decisions: tuple[Decision, ...] = ()
    shadowed: Mapping[str, list[str]] = {}

    @property
    def root(self) -> PlanNode:
        return self.nodes[-1]

    @property
    def container(self) -> str | None:
        return self.root.container

    def node(self, node_id: str) -> PlanNode:
        return next(n for n in self.nodes if n.id == node_id)

    def by_id(self) -> dict[str, PlanNode]:
        """Node id -> node (``node`` scans; walks over every node use this)."""
        return {n.id: n for n in self.nodes}

    def to_json(self) -> dict[str, Any]:
        return {
            "query": {"tags": list(self.query.tags), "inputs": dict(self.query.inputs)},
            "root": self.root.id,
            "facts_source": self.facts_source,
            "nodes": [_node_json(n) for n in self.nodes],
        }

    def render_tree(self, step_detail: StepDetail | None = None) -> str:
        """The DAG as an indented tree from the root (shared nodes shown once, then by id);
        ``step_detail(node, step)`` gives extra lines shown under each step."""
        lines: list[str] = []
        shown: set[str] = set()
        nodes = self.by_id()
        stack = [(self.root, "", "")]  # an explicit stack: a 5,000-deep chain renders too
        while stack:
            node, alias, indent = stack.pop()
            if self._tree(node, alias, indent, lines, shown, step_detail):
                detail = indent + "    "
                stack += [(nodes[dep_id], dep_alias, detail) for dep_alias, dep_id in reversed(list(node.deps.items()))]
        return "\n".join(lines)

    def _tree(self, node: PlanNode, alias: str, indent: str, lines: list[str], shown: set[str],
              step_detail: StepDetail | None) -> bool:
        """One node's lines; False when it was shown above (its deps are not shown again)."""
        label = f"{alias}: " if alias else ""
        if node.id in shown:
            lines.append(f"{indent}{label}{node.id} (see above)")
            return False
        shown.add(node.id)
        variations = ",".join(f"{k}.{v}" if v is not True else k for k, v in node.variations.items())
        shown_reason = node.cache_reason and node.cache_status != "hit"
        status = node.cache_status + (f" ({node.cache_reason})" if shown_reason else "")
        lines.append(f"{indent}{label}{node.id} [{node.recipe.source}] key={node.cache_key[:12]} cache={status}")
        detail = indent + "    "
        if variations:
            lines.append(f"{detail}variations: {variations}")
        if node.inputs:
            lines.append(f"{detail}inputs: " + ", ".join(f"{k}={v!r}" for k, v in node.inputs.items()))
        for step in node.steps:
            lines.append(f"{detail}step {step.id}: {step.uses}")
            lines += [f"{detail}    {extra}" for extra in (step_detail(node, step) if step_detail else ())]
        return True


def _node_json(node: PlanNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "recipe": node.recipe.name,
        "recipe_version": node.recipe.version,
        "source": node.recipe.source,
        "path": str(node.recipe.path),
        "digest": node.recipe.digest,
        "variations": dict(node.variations),
        "inputs": dict(node.inputs),
        "deps": dict(node.deps),
        "steps": [{"id": s.id, "uses": s.uses, "with": dict(s.with_)} for s in node.steps],
        "requires": dict(node.requires),
        "container": node.container,
        "cache": {"enabled": node.cacheable, "key": node.cache_key, "status": node.cache_status,
                  "reason": node.cache_reason, "parts": dict(node.key_parts)},
    }


@dataclass(frozen=True)
class StepTypes:
    """What the plan needs of the installed step types: each one's version (part of a node's
    cache key) and those that declare ``measures=True``."""

    versions: Mapping[str, str]
    measuring: frozenset[str] = frozenset()


@dataclass(frozen=True)
class FactsOrigin:
    """Where the plan's facts came from: a description (detected, or the file) and the
    ``--facts`` file, if one was given."""

    source: str
    file: Path | None = None


def build_plan(resolution: Resolution, query: PlanQuery, steps: StepTypes, facts: FactsOrigin,
               cache: Cache | None, shadowed: Mapping[str, list[str]] | None = None) -> Plan:
    """Compute keys in topological order and, with a cache, each node's would-hit status."""
    with paused_gc():
        return _build_plan(resolution, query, steps, facts, cache, shadowed)


def _build_plan(resolution: Resolution, query: PlanQuery, steps: StepTypes, facts: FactsOrigin,
                cache: Cache | None, shadowed: Mapping[str, list[str]] | None) -> Plan:
    step_versions, measuring_steps = steps.versions, steps.measuring
    facts_source, facts_file = facts.source, facts.file
    built: dict[str, PlanNode] = {}
    digests = _Digests()
    of = digests.of
    format_part = canonical_digest(KEY_FORMAT)
    for node_id in _topological(resolution):
        rnode = resolution.nodes[node_id]
        recipe = rnode.recipe
        versions = {s.uses: step_versions.get(s.uses, "?") for s in rnode.steps}
        volatile = tuple(a for a, d in rnode.deps.items() if not built[d].cacheable or built[d].volatile)
        deps = {alias: built[dep].cache_key for alias, dep in rnode.deps.items()}
        paths = _path_stats(rnode)
        env = _allowed_env(rnode)
        values: dict[str, Any] = {
            "format": KEY_FORMAT,
            "recipe": recipe.digest,
            "inputs": rnode.inputs,
            "variations": rnode.variations,
            "deps": deps,
            "facts": rnode.facts_used,
            "steps": versions,
            "paths": paths,
            "env": env,
        }
        parts = {  # the same digests as {k: digests.of(v)}: the unique parts skip the memo
            "format": format_part,
            "recipe": canonical_digest(recipe.digest),
            "inputs": of(rnode.inputs),
            "variations": of(rnode.variations),
            "deps": canonical_digest(deps) if deps else of(deps),
            "facts": of(rnode.facts_used),
            "steps": of(versions),
            "paths": of(paths),
            "env": of(env),
        }
        key = _key_digest(parts)
        measures = _measures(rnode.steps, measuring_steps)
        status, reason = _status(recipe, measures, volatile, key, cache)
        built[node_id] = PlanNode(rnode.id, recipe, rnode.variations, rnode.inputs, rnode.deps,
                                  rnode.steps, key, parts, values, rnode.requires, rnode.facts_used,
                                  versions, rnode.container, volatile, status, reason, measures)
    return Plan(query, tuple(built.values()), facts_source, facts_file,
                tuple(resolution.decisions), dict(shadowed or {}))


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
_SCALARS = frozenset({str, int, bool, type(None)})  # not float: 0.0 == -0.0, but their JSON differs
_C_ENCODE = None if c_make_encoder is None else c_make_encoder(
    {}, str, encode_basestring_ascii, None, ":", ",", True, False, True)
"""``_ENCODER``'s own C encoder, made once: ``encode`` makes a new one on every call. Its
circular-reference markers are a dict it empties again after each value it encodes."""


def canonical_digest(value: Any) -> str:
    """:func:`cmx_core.datautil.digest`, the same text hashed, with one encoder made once
    (``json.dumps`` with options builds a new encoder on every call)."""
    if value.__class__ is str:
        return sha256(encode_basestring_ascii(value).encode()).hexdigest()
    if _C_ENCODE is None:
        return sha256(_ENCODER.encode(value).encode()).hexdigest()
    try:
        text = "".join(_C_ENCODE(value, 0))
    except BaseException:
        _C_ENCODE.markers.clear()  # a failed value leaves its marks
        raise
    return sha256(text.encode()).hexdigest()


_KEY_TEXT = ('{{"deps":"{deps}","env":"{env}","facts":"{facts}","format":"{format}","inputs":"{inputs}",'
             '"paths":"{paths}","recipe":"{recipe}","steps":"{steps}","variations":"{variations}"}}')
"""The canonical JSON of a node's key parts (each a hex digest: nothing to escape), keys sorted."""


def _key_digest(parts: Mapping[str, str]) -> str:
    """``canonical_digest(parts)[:32]`` of the nine key parts, the text written directly."""
    return sha256(_KEY_TEXT.format_map(parts).encode()).hexdigest()[:32]


class _Digests:
    """Key-part digests of one plan, each distinct small value hashed once: most nodes share
    their format, step versions, facts, variations and empty inputs, paths and env."""

    def __init__(self) -> None:
        self._memo: dict[Hashable, str] = {}

    def of(self, value: Any) -> str:
        if value.__class__ is dict and not value:  # most inputs, facts, paths and env
            return _EMPTY_DIGEST
        key = _memo_key(value)
        if key is None:
            return canonical_digest(value)
        known = self._memo.get(key)
        if known is None:
            known = self._memo[key] = canonical_digest(value)
        return known


_EMPTY_DIGEST = canonical_digest({})


def _memo_key(value: Any) -> Hashable | None:
    """A hashable stand-in for ``value`` that is equal only for values of equal canonical
    JSON (classes included: ``1`` and ``true`` differ), or None when there is no cheap one."""
    kind = value.__class__
    if kind in _SCALARS:
        return kind, value
    if kind is not dict or len(value) > 8:
        return None
    key: list[Any] = [dict]  # in insertion order: the same dict in another order is only a miss
    for name, item in value.items():
        item_kind = item.__class__
        if name.__class__ is not str or item_kind not in _SCALARS:
            return None
        key += (name, item_kind, item)
    return tuple(key)


def _path_stats(rnode: ResolvedNode) -> dict[str, Any]:
    """[size, mtime_ns, ctime_ns, inode] of each ``path`` input that exists: a changed file is a
    new key, so a cache hit or a lock replay never takes an edited dataset for the recorded one.
    The ctime and inode are what an edit in place cannot keep: it may put the size and the mtime
    back (``os.utime``), but every write moves the ctime, which no user call sets back."""
    stats: dict[str, Any] = {}
    for name, spec in rnode.recipe.inputs.items():
        value = rnode.inputs.get(name)
        if spec.type == "path" and isinstance(value, str):
            reads.file(value)  # its state is part of the key, present or not
            try:
                st = os.stat(value)
            except OSError:
                continue
            stats[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return stats


def _allowed_env(rnode: ResolvedNode) -> dict[str, str | None]:
    """Values of the host variables steps let through (``env_allow``): they change outputs."""
    names: set[str] = set()
    for step in rnode.steps:
        allow = step.with_.get("env_allow")
        if allow:
            names.update(str(n) for n in ([allow] if isinstance(allow, str) else allow))
    if not names:
        return {}
    for name in names:
        reads.env(name)
    return {name: os.environ.get(name) for name in sorted(names)}


def _measures(steps: tuple[StepSpec, ...], measuring_steps: frozenset[str]) -> bool:
    return any(s.measures if s.measures is not None else s.uses in measuring_steps for s in steps)


def _cacheable(recipe: Recipe, measures: bool) -> bool:
    policy = recipe.cache
    return policy.enabled and (policy.measurements or not measures)


def _status(recipe: Recipe, measures: bool, volatile: tuple[str, ...], key: str,
            cache: Cache | None) -> tuple[str, str]:
    """A node's would-hit cache status and its reason (the node is built once, with them)."""
    if not _cacheable(recipe, measures):
        reason = "cache: false" if not recipe.cache.enabled else \
            "measures on every run (cache: {measurements: true} reuses a measurement)"
        return "disabled", reason
    if volatile:
        return "deferred", f"depends on uncached {', '.join(volatile)}"
    if cache is None:
        return "unknown", ""
    entry, reason = cache.lookup(key, recipe.cache.expires_s)
    return "hit" if entry else "miss", reason


def _topological(resolution: Resolution) -> list[str]:
    """Deps before dependents, in the deterministic order deps were declared (a post-order
    depth-first walk with an explicit stack: no recursion limit on the depth)."""
    order: list[str] = []
    seen = {resolution.root}
    stack = [(resolution.root, iter(resolution.nodes[resolution.root].deps.values()))]
    while stack:
        node_id, pending = stack[-1]
        for dep in pending:
            if dep not in seen:
                seen.add(dep)
                stack.append((dep, iter(resolution.nodes[dep].deps.values())))
                break
        else:
            stack.pop()
            order.append(node_id)
    return order


def core_version() -> str:
    return __version__
