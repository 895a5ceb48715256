"""Event hooks called one implementation at a time, so one failure never stops the others.

pluggy calls every implementation of a hook in one loop and stops at the first that raises.
For event hooks (observers: progress, logging, uploads) that is wrong, so :func:`fire` walks
the implementations itself, in pluggy's order:

* wrappers first (``@hookimpl(wrapper=True)``, new style: a generator that yields once):
  each runs up to its ``yield`` before the plain implementations and resumes after them,
  the outermost first in and last out;
* then the plain implementations: ``tryfirst=True`` ones first, ``trylast=True`` ones last,
  the rest latest-registered first (pluggy's LIFO).

An implementation that raises is reported on stderr as one line naming the plugin, the hook
and the error; the rest still run. A wrapper that raises before its ``yield`` is not resumed.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Mapping
from typing import Any

import pluggy


def fire(hook: Any, kwargs: Mapping[str, Any]) -> list[str]:
    """Call every implementation of the pluggy hook caller ``hook``; returns the warnings
    printed (one per implementation that raised)."""
    order = list(reversed(hook.get_hookimpls()))
    warnings: list[str] = []
    started: list[tuple[Any, Generator[Any, Any, Any]]] = []
    for impl in (i for i in order if _is_wrapper(i)):
        try:
            gen = impl.function(*_args(impl, kwargs))
            next(gen)
        except Exception as exc:  # noqa: BLE001 - an observer's bug is not the run's
            warnings.append(_warn(impl, hook.name, exc))
            continue
        started.append((impl, gen))
    for impl in (i for i in order if not _is_wrapper(i)):
        try:
            impl.function(*_args(impl, kwargs))
        except Exception as exc:  # noqa: BLE001
            warnings.append(_warn(impl, hook.name, exc))
    for impl, gen in reversed(started):
        try:
            gen.send(_outcome(impl))
        except StopIteration:
            continue
        except Exception as exc:  # noqa: BLE001
            warnings.append(_warn(impl, hook.name, exc))
            continue
        warnings.append(_warn(impl, hook.name, RuntimeError("a wrapper must yield exactly once")))
    return warnings


def _is_wrapper(impl: Any) -> bool:
    return bool(getattr(impl, "wrapper", False) or getattr(impl, "hookwrapper", False))


def _outcome(impl: Any) -> Any:
    """What a wrapper's ``yield`` returns: None (new style), a pluggy Result (old style)."""
    if getattr(impl, "hookwrapper", False):
        return pluggy.Result(None, None)
    return None


def _args(impl: Any, kwargs: Mapping[str, Any]) -> list[Any]:
    return [kwargs[name] for name in impl.argnames]


def _warn(impl: Any, hook: str, exc: BaseException) -> str:

    line = f"cmx: warning: plugin '{impl.plugin_name}': its {hook} hook failed: {one_line(exc)}"
    print(line, file=sys.stderr)
    return line


def one_line(exc: BaseException) -> str:
    """The whole message on one line (pluggy puts the mismatched arguments on later lines)."""
    text = "; ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}".rstrip(": ")
