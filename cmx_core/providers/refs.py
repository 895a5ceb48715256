"""Importable references to callables, so a later process can call a plugin's function
without loading every plugin through pluggy first.

A reference is JSON data: ``["fn", module, qualname]`` for a module-level function, or
``["partial", ref, [ref, ...]]`` for a :func:`functools.partial` of such a function over
positional arguments that are themselves references. :func:`reference` returns None for
anything else (a lambda, a bound method, a closure, keyword arguments): such a callable
simply cannot be replayed, and the caller falls back to the full path.

Import-light on purpose (the warm-run replay in :mod:`cmx_core.run.replay` uses it).
"""

from __future__ import annotations

import importlib
from functools import partial

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def reference(fn: Any) -> list[Any] | None:
    """The reference of ``fn``, or None when ``fn`` cannot be found again by name."""
    if isinstance(fn, partial):
        if fn.keywords:
            return None
        inner = reference(fn.func)
        args = [reference(arg) for arg in fn.args]
        if inner is None or any(arg is None for arg in args):
            return None
        return ["partial", inner, args]
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname or "." in qualname:
        return None
    try:
        found = resolve(["fn", module, qualname])
    except (ImportError, AttributeError, ValueError):
        return None
    return ["fn", module, qualname] if found is fn else None


def resolve(ref: Any) -> Callable[..., Any]:
    """The callable a reference names; ImportError, AttributeError or ValueError when it
    names nothing (the module was removed, the function renamed, the data is malformed)."""
    if not isinstance(ref, list) or not ref:
        raise ValueError(f"not a callable reference: {ref!r}")
    if ref[0] == "fn" and len(ref) == 3:
        return getattr(importlib.import_module(str(ref[1])), str(ref[2]))  # type: ignore[no-any-return]
    if ref[0] == "partial" and len(ref) == 3 and isinstance(ref[2], list):
        return partial(resolve(ref[1]), *[resolve(arg) for arg in ref[2]])
    raise ValueError(f"not a callable reference: {ref!r}")

