"""Reading recipe YAML: one document, no duplicate keys, no recursive aliases, and the line
of a key path for error messages (looked up only when an error is reported, so the happy
path never composes YAML nodes twice)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from cmx_core.datautil import read_capped
from cmx_core.errors import Location, RecipeError


class WrittenAsNumber(str):
    """The text of a tag or version YAML would have read as a number (``tags: [1]``,
    ``version: 1.10``): kept as written, and marked so the format check refuses it
    (:mod:`cmx_core.recipes.check`) instead of taking it quietly."""

    __slots__ = ()


_NUMBER_TEXT_TAG = "!cmx/written-as-number"


@lru_cache(maxsize=1)
def yaml_loader() -> Any:
    """libyaml's C loader when present (10x faster), else the pure-Python one; it builds a
    :class:`WrittenAsNumber` for the scalars :func:`_keep_strings` marks."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    Loader.add_constructor(_NUMBER_TEXT_TAG, lambda loader, node: WrittenAsNumber(node.value))
    return Loader


MAX_FILE_BYTES = 1 << 20
"""A recipe file larger than this (1 MiB) is refused: recipes are declarations, not data."""
MAX_NODES = 100_000
"""The most YAML nodes a recipe may hold once its aliases are expanded (an alias bomb of
1 KB expands to billions: every reader of the recipe directory would pay for it)."""
MAX_DEPTH = 64
"""The deepest nesting of mappings and sequences a recipe may have."""


def parse_yaml(raw: bytes, path: Path) -> Any:
    """Parse one YAML document, refusing duplicate mapping keys (YAML would silently keep
    the last one), files over :data:`MAX_FILE_BYTES`, and trees that expand (aliases
    included) past :data:`MAX_NODES` nodes or nest past :data:`MAX_DEPTH`. This is
    ``yaml.load`` split in two: the (C) composer builds the node tree once, it is checked,
    then the same tree is constructed."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    if len(raw) > MAX_FILE_BYTES:
        raise RecipeError(Location(str(path)), f"the file is more than a recipe may be ({MAX_FILE_BYTES} "
                                               "bytes); keep data out of recipes")
    loader = yaml_loader()(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicate_keys(node, path)
        _keep_strings(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or exc.context or "invalid YAML"
        raise RecipeError(Location(str(path), line), f"malformed YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(Location(str(path)), f"malformed YAML: {exc}") from None
    finally:
        loader.dispose()


_MERGE_TAG = "tag:yaml.org,2002:merge"
_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})
_STR_TAG = "tag:yaml.org,2002:str"
STRING_KEYS = frozenset({"version", "tags"})
"""Keys whose scalars are always text: ``version: 1.10`` stays ``"1.10"`` (not the float 1.1),
the tag ``no`` stays ``"no"`` (not YAML's false)."""


def _keep_strings(root: Any) -> None:
    """Re-tag the plain scalars under :data:`STRING_KEYS` as strings before construction
    (quoted scalars and explicit tags are left as they are)."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen or isinstance(node, yaml.ScalarNode):
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value in STRING_KEYS:
                    items = value.value if isinstance(value, yaml.SequenceNode) else [value]
                    for item in items:
                        if isinstance(item, yaml.ScalarNode) and not item.style and item.tag != _STR_TAG:
                            item.tag = _NUMBER_TEXT_TAG if item.tag in _NUMBER_TAGS else _STR_TAG
                stack.append(value)
        else:
            stack.extend(node.value)


def _check_duplicate_keys(root: Any, path: Path) -> None:
    """Raise a RecipeError for the first mapping that has the same scalar key twice. The
    common case (no duplicates) is one cheap pass; key paths are worked out only on error."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    mapping_node, scalar_node = yaml.MappingNode, yaml.ScalarNode
    stack = [root]
    visited: set[int] = set()  # aliases share nodes: visit each once (no alias blow-up)
    shared = False
    while stack:
        node = stack.pop()
        if node.__class__ is scalar_node:
            continue
        if id(node) in visited:
            shared = True
            continue
        visited.add(id(node))
        value = node.value
        if node.__class__ is mapping_node:
            try:
                distinct = len({(k.tag, k.value) for k, _ in value})
            except TypeError:  # a non-scalar key (unhashable value): check one by one
                distinct = -1
            if distinct != len(value):
                _raise_duplicate(value, _keypath_to(root, node), path)
            stack.extend([v for _, v in value])
        else:
            stack.extend(value)
    if shared:
        _check_not_recursive(root, path)
    _check_expanded_size(root, path)


def _check_expanded_size(root: Any, path: Path) -> None:
    """Refuse a tree whose expansion (each alias counted as a copy of what it refers to)
    exceeds :data:`MAX_NODES`, or that nests deeper than :data:`MAX_DEPTH`. Post-order with
    one size per distinct node, so the check itself costs one pass whatever the aliases."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    scalar_node, mapping_node = yaml.ScalarNode, yaml.MappingNode
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, expanded = stack.pop()
        if node.__class__ is scalar_node or (id(node) in sizes and not expanded):
            sizes.setdefault(id(node), 1)
            continue
        if depth > MAX_DEPTH:
            raise RecipeError(Location(str(path), node.start_mark.line + 1),
                              f"the YAML nests deeper than {MAX_DEPTH} levels; flatten it")
        children = [v for _, v in node.value] if node.__class__ is mapping_node else list(node.value)
        if not expanded:
            stack.append((node, depth, True))
            stack.extend((child, depth + 1, False) for child in children)
            continue
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        if total > MAX_NODES:
            raise RecipeError(Location(str(path), node.start_mark.line + 1),
                              f"the YAML expands to more than {MAX_NODES} nodes (aliases included: an alias "
                              "bomb?); write the values out or shorten them")
        sizes[id(node)] = total


def _check_not_recursive(root: Any, path: Path) -> None:
    """Refuse an alias inside the node it refers to (``a: &x {b: *x}``): the data would be
    infinitely deep. Only run when some node is shared, i.e. when the file uses aliases."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    collections = (yaml.MappingNode, yaml.SequenceNode)
    done: set[int] = set()
    on_path: set[int] = {id(root)}
    stack = [(root, iter(_children(root)))]
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
        elif isinstance(child, collections) and id(child) not in done:
            if id(child) in on_path:
                raise RecipeError(
                    Location(str(path), child.start_mark.line + 1, ".".join(map(str, _keypath_to(root, child)))),
                    "a YAML alias refers to a node that contains it (recursive data); recipes must be plain trees",
                )
            on_path.add(id(child))
            stack.append((child, iter(_children(child))))


def _children(node: Any) -> list[Any]:
    import yaml  # deferred: yaml only when this runs (27 modules)

    if isinstance(node, yaml.MappingNode):
        return [v for _, v in node.value]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _keypath_to(root: Any, target: Any) -> tuple[str | int, ...]:
    """The key path from ``root`` to the node ``target`` (for an error message)."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    visited: set[int] = set()
    while stack:
        node, keypath = stack.pop()
        if node is target:
            return keypath
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):  # reversed: the first path in file order wins
            stack.extend(reversed([(v, (*keypath, str(k.value))) for k, v in node.value]))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed([(v, (*keypath, i)) for i, v in enumerate(node.value)]))
    return ()


def _raise_duplicate(pairs: list[tuple[Any, Any]], keypath: tuple[str | int, ...], path: Path) -> None:
    import yaml  # deferred: yaml only when this runs (27 modules)

    first: dict[tuple[str, str], int] = {}
    for knode, _ in pairs:
        if not isinstance(knode, yaml.ScalarNode) or knode.tag == _MERGE_TAG:
            continue
        line = knode.start_mark.line + 1
        key = (knode.tag, knode.value)
        if key in first:
            dotted = ".".join(str(k) for k in (*keypath, knode.value))
            raise RecipeError(
                Location(str(path), line, dotted),
                f"duplicate key '{knode.value}' (first defined on line {first[key]}); remove one of them",
            )
        first[key] = line


def line_of(path: Path, keypath: tuple[str | int, ...]) -> int:
    """The 1-based line of ``keypath`` in the YAML file (0 if it cannot be found)."""
    import yaml  # deferred: yaml only when this runs (27 modules)

    try:
        node = yaml.compose(read_capped(path, MAX_FILE_BYTES), Loader=yaml_loader())
    except (OSError, yaml.YAMLError):
        return 0
    line = node.start_mark.line + 1 if node is not None else 0
    for key in keypath:
        child = _child_node(node, key)
        if child is None:
            break
        node, line = child
    return line


def _child_node(node: Any, key: str | int) -> tuple[Any, int] | None:
    import yaml  # deferred: yaml only when this runs (27 modules)

    if isinstance(node, yaml.MappingNode):
        for knode, vnode in node.value:
            if knode.value == str(key):
                return vnode, knode.start_mark.line + 1
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        child = node.value[key]
        return child, child.start_mark.line + 1
    return None


def dotted_key(keypath: tuple[str | int, ...]) -> str:
    """``steps.0.with.cmd[2]``: list indices in brackets, except a step's or a dep's number."""
    text = ""
    for i, part in enumerate(keypath):
        numbered = i > 0 and keypath[i - 1] in ("steps", "deps")
        text += f"[{part}]" if isinstance(part, int) and not numbered else (f".{part}" if text else str(part))
    return text


def fail_at(path: Path, keypath: tuple[str | int, ...], message: str) -> RecipeError:
    return RecipeError(Location(str(path), line_of(path, keypath), dotted_key(keypath)), message)
