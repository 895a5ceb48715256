"""Lockfiles: every run writes ``lock.json`` (the query, each node's recipe digest, version,
variations, inputs, cache key and step versions, the plugins and the facts the resolution
used). ``cmx run --lock FILE`` replays the query and refuses to run when anything resolves
differently, saying what changed, old -> new: the first changed line of a recipe (the lock
keeps each node's recipe text for that), each input, variation and step version by name, and
each fact a node used (unless ``--allow-drift`` lets that kind of fact differ). A cache key
is named only when nothing else explains its change."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmx_core import __version__
from cmx_core.datautil import JSONLimitError, loads_bounded, read_bounded
from cmx_core.errors import CmxError, ResolveError, UsageError
from cmx_core.run.drift import DRIFT_CLASSES
from cmx_core.run.lock_records import Lock, LockNode, LockPlugin, LockQuery, LockRepo

NODE_FIELDS = ("recipe", "version", "digest", "variations", "inputs", "steps", "cache_key")
_LABELS = {"variations": "variation", "inputs": "input", "steps": "step type", "facts_used": "fact"}
"""How a changed key of a mapping field is named in a drift line (``input n: 4 -> 5``)."""


def lock_document(plan: Any, plugins: Sequence[Mapping[str, Any]],
                  repos: Sequence[Mapping[str, str]] = ()) -> Lock:
    """The lock of ``plan``; ``plugins`` the loaded plugins (name, distribution, version,
    used); ``repos`` the added recipe repositories (name, url, commit, kind), which a replay
    checks out at these commits."""
    return Lock(
        query=LockQuery(tuple(plan.query.tags), dict(plan.query.inputs), tuple(str(d) for d in plan.query.recipes_dirs),
                        str(plan.facts_file) if plan.facts_file else None),
        nodes=tuple(LockNode(id=n.id, recipe=n.recipe.name, version=n.recipe.version, digest=n.recipe.digest,
                             source=str(n.recipe.path), variations=dict(n.variations), inputs=dict(n.inputs),
                             cache_key=n.cache_key, steps=dict(n.step_versions), facts_used=dict(n.facts_used),
                             recipe_text=_recipe_text(n.recipe.path))
                    for n in plan.nodes),
        plugins=tuple(LockPlugin.from_json(p) for p in plugins),
        repos=tuple(LockRepo.from_json(r) for r in repos),
        cmx_version=__version__,
        facts_source=plan.facts_source,
    )


def read_lock(path: Path) -> Lock:
    """A lockfile's record; one-line errors for anything that is not one."""
    try:
        doc = loads_bounded(read_bounded(path).decode())
    except OSError as exc:
        raise CmxError(f"--lock {path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CmxError(f"--lock {path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except JSONLimitError as exc:
        raise CmxError(f"--lock {path}: refused: the file {exc}") from None
    except UnicodeDecodeError:
        raise CmxError(f"--lock {path}: not a cmx lockfile (not UTF-8 text)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("query"), dict) or not isinstance(doc.get("nodes"), list):
        raise CmxError(f"--lock {path}: not a cmx lockfile (expected 'query' and 'nodes'; see a run's lock.json)")
    problem = shape_problem(doc, LOCK_SHAPE, "")
    if problem:
        raise CmxError(f"--lock {path}: not a cmx lockfile: {problem}")
    return Lock.from_json(doc)


_TEXT = (str, type(None))
LOCK_SHAPE: dict[str, Any] = {
    "query!": {"tags!": [str], "inputs": dict, "recipes_dirs": [str], "facts_file": _TEXT},
    "nodes!": [{"id!": str, "recipe": str, "version": _TEXT, "digest": _TEXT, "source": _TEXT,
                "variations": dict, "inputs": dict, "cache_key": _TEXT, "steps": dict, "facts_used": dict,
                "recipe_text": _TEXT}],
    "plugins": [{"distribution!": str, "version!": _TEXT}],
    "repos": [{"name!": str, "url": _TEXT, "commit!": str, "kind": _TEXT}],
}
"""The shape of a lockfile as replay reads it: a mapping's keys (``!``: required; others may be
absent, unknown ones are kept), ``[shape]`` a list of that shape, a type (or tuple of types) a
leaf. Checked before anything reads it, so a hand-edited lock is one line naming the key."""

_KINDS = {dict: "an object", list: "a list", str: "a string", type(None): "null"}


def shape_problem(value: Any, shape: Any, where: str) -> str | None:
    """What in ``value`` does not have ``shape`` (see :data:`LOCK_SHAPE`), named by key path."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where or 'the document'} must be an object, not {_kind(value)}"
        for spec_key, inner in shape.items():
            key = spec_key.rstrip("!")
            if key not in value:
                if spec_key.endswith("!"):
                    return f"{where + '.' if where else ''}{key} is missing"
                continue
            problem = shape_problem(value[key], inner, f"{where + '.' if where else ''}{key}")
            if problem:
                return problem
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} must be a list, not {_kind(value)}"
        for i, item in enumerate(value):
            problem = shape_problem(item, shape[0], f"{where}[{i}]")
            if problem:
                return problem
        return None
    kinds = shape if isinstance(shape, tuple) else (shape,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        return f"{where} must be {' or '.join(_KINDS.get(k, k.__name__) for k in kinds)}, not {_kind(value)}"
    return None


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__) if not isinstance(value, (int, float)) or \
        isinstance(value, bool) else f"the number {value}"


def _recipe_text(path: Path) -> str | None:
    """The recipe file's text, for showing which line changed (None if it cannot be read)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


HARDWARE_FACTS = ("gpus", "accelerator", "cpu", "memory", "cuda")
"""Facts (by their first dotted component) that describe the hardware, for the ``hardware`` class."""

_FACT_FIELDS = frozenset({"cache_key"})


def check_drift_classes(classes: Sequence[str]) -> None:
    """A UsageError for a drift class that does not exist."""
    for name in classes:
        if name not in DRIFT_CLASSES:
            raise UsageError(f"--allow-drift {name!r}: unknown; use one of {', '.join(sorted(DRIFT_CLASSES))}")


def check_drift(locked: Lock, current: Lock, path: Path,
                allow: Sequence[str] = ()) -> None:
    """Raise a ResolveError listing what resolves differently from the lock."""
    remote = "remote" in allow
    ignored = _FACT_FIELDS if remote else frozenset()
    if "plugins" in allow:
        ignored = ignored | {"steps", "cache_key"}
    diffs = _node_diffs(locked.nodes, current.nodes, ignored, _fact_drift(allow), facts=not remote)
    if "plugins" not in allow:
        diffs += _plugin_diffs(locked.plugins, current.plugins, used_only=remote)
    if diffs:
        shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
        raise ResolveError(f"--lock {path}: the run would differ from the lock: {shown}")


def _fact_drift(allow: Sequence[str]) -> frozenset[bool]:
    """Which facts may differ: ``True`` for hardware facts, ``False`` for the others."""
    return frozenset(kind for name, kind in (("hardware", True), ("software", False)) if name in allow)


def _facts_explain_key(old: LockNode, new: LockNode, allowed: frozenset[bool]) -> bool:
    """Whether the facts a node used differ, and only in allowed kinds (then its cache key may)."""
    before, after = dict(old.facts_used or {}), dict(new.facts_used or {})
    changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    return bool(changed) and all((str(k).split(".")[0] in HARDWARE_FACTS) in allowed for k in changed)


def _node_diffs(old_nodes: Sequence[LockNode], new_nodes: Sequence[LockNode],
                ignored: frozenset[str] = frozenset(), facts_allowed: frozenset[bool] = frozenset(),
                facts: bool = True) -> list[str]:
    old = {n.id: n for n in old_nodes}
    new = {n.id: n for n in new_nodes}
    diffs = [f"node {i} is gone" for i in old if i not in new] + [f"node {i} is new" for i in new if i not in old]
    for node_id in [i for i in old if i in new]:
        skip = ignored | ({"cache_key"} if _facts_explain_key(old[node_id], new[node_id], facts_allowed) else set())
        found: list[str] = []
        for field in NODE_FIELDS:
            if field in skip or old[node_id].value_of(field) == new[node_id].value_of(field):
                continue
            if field == "cache_key" and found:
                continue  # explained by what is already listed
            found += _field_diffs(old[node_id], new[node_id], field)
        if facts:
            found += _fact_diffs(old[node_id], new[node_id], facts_allowed)
        diffs += [f"node {node_id}: {line}" for line in found]
    return diffs


def _field_diffs(old: LockNode, new: LockNode, field: str) -> list[str]:
    """One field's change, old -> new: the recipe line for a digest, each key for a mapping."""
    before, after = old.value_of(field), new.value_of(field)
    if field == "digest":
        return [f"digest {_short(before)} -> {_short(after)}: " + _recipe_change(old, new)]
    if isinstance(before, Mapping) and isinstance(after, Mapping) and field in _LABELS:
        return _mapping_diffs(_LABELS[field], before, after)
    return [f"{field} {_short(before)} -> {_short(after)}"]


def _mapping_diffs(label: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """``input n: 4 -> 5`` for each key that differs (``(none)`` where a side lacks it)."""
    out = []
    for key in sorted(set(before) | set(after), key=str):
        if before.get(key, _NONE) != after.get(key, _NONE):
            out.append(f"{label} {key}: {_shown(before, key)} -> {_shown(after, key)}")
    return out


_NONE = object()


def _shown(values: Mapping[str, Any], key: str) -> str:
    return _short(values[key]) if key in values else "(none)"


def _recipe_change(old: LockNode, new: LockNode) -> str:
    """The first changed line of the recipe file, numbered as in the current file."""
    where = new.source or old.source or "the recipe"
    before, after = old.recipe_text, new.recipe_text
    if not isinstance(before, str) or not isinstance(after, str):
        return f"{where} changed (this lock keeps no recipe text to show the line)"
    old_lines, new_lines = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        was = old_lines[i1] if i1 < i2 else "(no line)"
        now = new_lines[j1] if j1 < j2 else "(line removed)"
        return f"{where} line {j1 + 1}: {_line(was)} -> {_line(now)}"
    return f"{where}: the same lines (whitespace at the ends of lines or the final newline changed)"


def _line(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _fact_diffs(old: LockNode, new: LockNode, allowed: frozenset[bool]) -> list[str]:
    """The facts a node used that changed, except those of a kind ``--allow-drift`` allows."""
    before, after = dict(old.facts_used or {}), dict(new.facts_used or {})
    kept = {k for k in set(before) | set(after) if (str(k).split(".")[0] in HARDWARE_FACTS) not in allowed}
    return _mapping_diffs("fact", {k: v for k, v in before.items() if k in kept},
                          {k: v for k, v in after.items() if k in kept})


def _plugin_diffs(old: Sequence[LockPlugin], new: Sequence[LockPlugin], used_only: bool = False) -> list[str]:
    before = {p.distribution: p.version for p in old if p.used or not used_only}
    after = {p.distribution: p.version for p in new}
    return [f"plugin {d} {v} -> {after.get(d, 'not installed')}" for d, v in before.items() if after.get(d) != v]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 40 else text[:16] + "..."
