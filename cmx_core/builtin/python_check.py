"""The ``python`` step's plan-time check: its ``function: module:name`` must exist, found
without running any of the step's code (no import: the module's file is located the way
the step imports it, next to the recipe first, and its source is read with ``ast``).
Where that cannot tell (an extension module, a module-level ``__getattr__`` or ``import
*``, a template), the run decides, as before."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

_UNKNOWN = None


def check_python_step(params: Mapping[str, Any], recipe_dir: Path) -> tuple[str, str] | None:
    """(``with:`` key, problem) when the step's function certainly does not exist, else None."""
    target = params.get("function")
    if not isinstance(target, str) or "{" in target or ":" not in target:
        return None  # a template, or a shape the parameter schema already refuses
    return _check(target, recipe_dir)


@lru_cache(maxsize=1024)
def _check(target: str, recipe_dir: Path) -> tuple[str, str] | None:
    """Once per function and recipe directory in a process (a plan of many nodes of one
    recipe looks once)."""
    module_name, _, attr = target.partition(":")
    found = _module_file(module_name, recipe_dir)
    if isinstance(found, str):
        return "function", f"cannot find {target}: {found}"
    if found is _UNKNOWN or found.suffix != ".py":
        return None
    try:
        tree = ast.parse(found.read_bytes(), str(found))
    except (OSError, SyntaxError, ValueError):
        return None  # the run reports it with Python's own words
    names = _top_level_names(tree)
    if names is _UNKNOWN or attr in names:
        return None
    return "function", f"cannot find {target}: {found} defines no '{attr}'"


def _module_file(module_name: str, recipe_dir: Path) -> Path | str | None:
    """The module's source file, a reason it does not exist, or None (cannot tell)."""
    parts = module_name.split(".")
    done: list[str] = []  # the dotted name found so far
    top = parts[0]
    if (recipe_dir / f"{top}.py").is_file() or (recipe_dir / top / "__init__.py").is_file():
        locations = [str(recipe_dir)]
    else:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: finds it, runs nothing
        except (ImportError, ValueError):
            return _UNKNOWN
        if spec is None:
            return f"no module named '{top}'"
        if len(parts) == 1:
            return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else _UNKNOWN
        locations = list(spec.submodule_search_locations or [])
        if not locations:
            return _UNKNOWN  # a module that is not a package may still set submodules (os.path)
        done, parts = [top], parts[1:]
    found: Path | None = None
    for part in parts:
        done.append(part)
        found = None
        for location in locations:
            base = Path(location)
            if (base / part / "__init__.py").is_file():
                found = base / part / "__init__.py"
                break
            if (base / f"{part}.py").is_file():
                found = base / f"{part}.py"
                break
            if (base / part).is_dir() or any(base.glob(f"{part}.*.so")) or any(base.glob(f"{part}.*.pyd")):
                return _UNKNOWN  # a namespace package or an extension module
        if found is None:
            return f"no module named '{'.'.join(done)}'"
        locations = [str(found.parent)] if found.name == "__init__.py" else []
    return found


def _top_level_names(tree: ast.Module) -> set[str] | None:
    """The names a module defines at its top level; None when a ``__getattr__`` or a star
    import could define any name."""
    names: set[str] = set()
    for node in tree.body:
        names |= _defined(node)
    if "__getattr__" in names or "*" in names:
        return None
    return names


def _defined(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).partition(".")[0] for a in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):  # conditional definitions count
        inner: set[str] = set()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                inner |= _defined(child)
            elif isinstance(child, ast.ExceptHandler):
                for grandchild in child.body:
                    inner |= _defined(grandchild)
        return inner
    return set()
