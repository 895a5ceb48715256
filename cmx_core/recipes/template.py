"""Rendering ``with:`` values in a sandboxed Jinja2 environment with strict undefined.

Jinja2 is imported only when a value actually contains a template, so recipes without
templates never pay for it. A string that is exactly one ``{{ expression }}`` keeps its
native type (a number stays a number, a list stays a list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from cmx_core.datautil import iter_strings
from cmx_core.errors import CmxError

MAX_TEMPLATE_CHARS = 1_000_000
"""The longest string (or list) a template may build: ``'x' * n``, a padded ``ljust(n)``,
``center(n)``, ``indent(n)`` and the rendered text itself."""
MAX_TEMPLATE_ITEMS = 100_000
"""How many items the ``range()`` calls of one rendering may produce together (nested loops
count each inner range again), so a template cannot loop for hours."""

_SINGLE = re.compile(r"^\{\{(.*)\}\}$", re.DOTALL)
_FACT_REF = re.compile(r"\bfacts(?:\.|\[\s*['\"])([A-Za-z_][A-Za-z0-9_]*)")


class TemplateError(CmxError):
    """A template that cannot be rendered (unknown name, syntax error, sandbox refusal);
    ``bound`` when it passed :data:`MAX_TEMPLATE_CHARS` or :data:`MAX_TEMPLATE_ITEMS`."""

    bound = False


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
    import jinja2  # deferred: jinja2 only when this runs (63 modules)

    match = _SINGLE.match(text.strip())
    token = _budget.set([MAX_TEMPLATE_ITEMS])
    try:
        if match and "{{" not in match.group(1) and "{%" not in text:
            result = _expression(match.group(1).strip())(**context)
            if isinstance(result, jinja2.Undefined):
                str(result)  # raises UndefinedError with the name
            return result
        return _joined(_template(text).generate(**context))
    except jinja2.TemplateError as exc:
        error = TemplateError(f"{where}: cannot render {text!r}: {exc.message or exc}")
        error.bound = getattr(exc, "cmx_bound", False)
        raise error from None
    except CmxError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, MemoryError) as exc:
        raise TemplateError(f"{where}: cannot render {text!r}: {exc}") from None
    finally:
        _budget.reset(token)


_MAY_GROW = re.compile(r"range|\*|center|indent|truncate|wordwrap|just|zfill|expandtabs")
"""What a template that may hit a bound holds somewhere (a loop, a repetition, a padding: the
bounded operations); others are not rendered at plan time."""


def bound_problem(text: str, known: Mapping[str, Any]) -> str | None:
    """Why rendering ``text`` would pass a bound (:data:`MAX_TEMPLATE_CHARS`,
    :data:`MAX_TEMPLATE_ITEMS`) whatever the run-time names hold, or None.

    The plan renders the template once with the names it knows (``known``: inputs,
    variation, variations, facts) and a chainable undefined value for the others (deps,
    steps, node, run); only a bound's refusal counts, since any other error may come from a
    value that exists only at run time. So ``cmx plan`` exits 2 where ``cmx run`` would for
    ``range(10**9)``, ``'x' * 10**9`` or ``range(inputs.n)``."""
    if not _MAY_GROW.search(text):
        return None
    import jinja2  # deferred: jinja2 only when this runs (63 modules)

    context = {name: known.get(name, jinja2.ChainableUndefined(name=name)) for name in _RUN_NAMES}
    try:
        _render_string(text, context, "")
    except TemplateError as exc:
        return str(exc)[2:] if getattr(exc, "bound", False) else None
    except (CmxError, RecursionError):  # anything but a bound: the run decides
        return None
    return None


_RUN_NAMES = ("inputs", "variation", "variations", "facts", "deps", "steps", "node", "run")


def _joined(pieces: Iterator[str]) -> str:
    """The rendered text, refused once it grows past :data:`MAX_TEMPLATE_CHARS`."""
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_TEMPLATE_CHARS:
            raise _too_big("the rendered text is too long")
        out.append(piece)
    return "".join(out)


@lru_cache(maxsize=4096)
def _expression(source: str) -> Any:
    """A compiled ``{{ expression }}``, parsed once per text (a plan renders the same
    dep ``with:`` for many nodes)."""
    return _environment().compile_expression(source, undefined_to_none=False)


@lru_cache(maxsize=4096)
def _template(text: str) -> Any:
    """A compiled template, parsed once per text."""
    return _environment().from_string(text)


_budget: ContextVar[list[int]] = ContextVar("cmx_template_budget")


def _too_big(what: str) -> Exception:
    # deferred: jinja2 only when this runs (63 modules)
    from jinja2.exceptions import SecurityError  # a TemplateError: reported with where it is

    error = SecurityError(f"{what}; a template may build at most {MAX_TEMPLATE_CHARS:,} characters "
                          f"and loop over at most {MAX_TEMPLATE_ITEMS:,} range() items")
    error.cmx_bound = True  # type: ignore[attr-defined]  # a bound, not a value only the run has
    return error


def _bounded_range(*args: int) -> range:
    items = range(*args)
    budget = _budget.get(None)
    if budget is None:
        budget = [MAX_TEMPLATE_ITEMS]
        _budget.set(budget)
    budget[0] -= len(items)
    if budget[0] < 0:
        raise _too_big(f"range({', '.join(map(str, args))}) goes past the template's loop budget")
    return items


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def _bounded_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse ``'x' * n`` (either way round) and ``a ** b`` whose result would be huge."""
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if _sized(seq) and isinstance(n, int) and _sized(seq) * n > MAX_TEMPLATE_CHARS:
                raise _too_big(f"a {type(seq).__name__} of {_sized(seq):,} repeated {n:,} times is too long")
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
            and right > 0 and right * abs(left).bit_length() > 8 * MAX_TEMPLATE_CHARS:
        raise _too_big(f"{left} ** {right} is too large a number")


def _bounded_width(name: str, original: Any) -> Any:
    def bounded(value: Any, width: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(width, int) and width > MAX_TEMPLATE_CHARS:
            raise _too_big(f"{name}({width:,}) is too wide")
        return original(value, *(() if width is None else (width,)), *args, **kwargs)

    return bounded


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2  # deferred: jinja2 only when this runs (63 modules)
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # deferred: jinja2 only when this runs (64 modules)

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _bounded_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(__obj, "__self__", None).__class__ in (str, bytes) and any(
                    isinstance(a, int) and a > MAX_TEMPLATE_CHARS for a in (*args, *kwargs.values())):
                raise _too_big(f"{__obj.__name__}({', '.join(map(repr, args))}) asks for too long a string")
            return super().call(__context, __obj, *args, **kwargs)

    env = Bounded(undefined=jinja2.StrictUndefined, autoescape=False)
    env.globals["range"] = _bounded_range
    for name in ("center", "indent", "truncate", "wordwrap"):
        env.filters[name] = _bounded_width(name, env.filters[name])
    env.globals.update(_FUNCTIONS)
    return env
