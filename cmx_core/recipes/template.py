"""Rendering ``with:`` values in a sandboxed Jinja2 environment with strict undefined.

Jinja2 is imported only when a value actually contains a template, so recipes without
templates never pay for it. A string that is exactly one ``{{ expression }}`` keeps its
native type (a number stays a number, a list stays a list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from cmx_core.datautil import iter_strings
from cmx_core.errors import CmxError

_SINGLE = re.compile(r"^\{\{(.*)\}\}$", re.DOTALL)
_FACT_REF = re.compile(r"\bfacts(?:\.|\[\s*['\"])([A-Za-z_][A-Za-z0-9_]*)")


class TemplateError(CmxError):
    """A template that cannot be rendered (unknown name, syntax error, sandbox refusal)."""


_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def register_template_function(name: str, function: Callable[..., Any]) -> None:
    """Make ``function`` callable as ``name(...)`` in every recipe template (a plugin's
    derived settings: typed, unit-tested code a recipe names once instead of a Jinja
    program). A name is registered once; registering a function of another module or name
    under it is an error (the same function again, as from a reloaded module, is not)."""
    if not name.isidentifier() or name in ("inputs", "variation", "variations", "facts", "deps", "steps",
                                           "node", "run"):
        raise CmxError(f"template function name {name!r}: not an identifier, or a template name")
    known = _FUNCTIONS.get(name)
    if known is not None and _origin(known) != _origin(function):  # a reloaded module may register again
        raise CmxError(f"template function {name!r} is registered twice")
    _FUNCTIONS[name] = function
    if _environment.cache_info().currsize:
        _environment().globals[name] = function


def _origin(function: Callable[..., Any]) -> tuple[str, str]:
    return (getattr(function, "__module__", ""), getattr(function, "__qualname__", repr(function)))


def template_functions() -> frozenset[str]:
    """The names of the registered template functions."""
    return frozenset(_FUNCTIONS)


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def render_value(value: Any, context: Mapping[str, Any], where: str) -> Any:
    """Render every template string inside ``value`` (recursively through lists/maps)."""
    if isinstance(value, Mapping):
        return {k: render_value(v, context, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [render_value(v, context, f"{where}[{i}]") for i, v in enumerate(value)]
    if not is_template(value):
        return value
    return _render_string(value, context, where)


def fact_names(value: Any) -> set[str]:
    """Top-level fact names a (possibly nested) template value refers to."""
    if value.__class__ is dict and not value:
        return set()
    return {m.group(1) for text in iter_strings(value) if "facts" in text for m in _FACT_REF.finditer(text)}


def _render_string(text: str, context: Mapping[str, Any], where: str) -> Any:
    import jinja2

    match = _SINGLE.match(text.strip())
    try:
        if match and "{{" not in match.group(1) and "{%" not in text:
            result = _expression(match.group(1).strip())(**context)
            if isinstance(result, jinja2.Undefined):
                str(result)  # raises UndefinedError with the name
            return result
        return _template(text).render(**context)
    except jinja2.TemplateError as exc:
        raise TemplateError(f"{where}: cannot render {text!r}: {exc.message or exc}") from None
    except CmxError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise TemplateError(f"{where}: cannot render {text!r}: {exc}") from None


@lru_cache(maxsize=4096)
def _expression(source: str) -> Any:
    """A compiled ``{{ expression }}``, parsed once per text (a plan renders the same
    dep ``with:`` for many nodes)."""
    return _environment().compile_expression(source, undefined_to_none=False)


@lru_cache(maxsize=4096)
def _template(text: str) -> Any:
    """A compiled template, parsed once per text."""
    return _environment().from_string(text)


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
    env.globals.update(_FUNCTIONS)
    return env
