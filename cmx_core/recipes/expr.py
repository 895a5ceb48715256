"""A small, safe expression language for ``when:`` conditions — never Python ``eval``.

The text is parsed with :mod:`ast` and only a whitelist of node types is accepted:
literals (and negative numbers), names, attribute and constant-subscript access,
comparisons (including ``in``), ``and``/``or``/``not`` and lists/tuples. Calls, lambdas,
comprehensions, arithmetic and dunder attributes are refused at load time. Evaluation walks the tree over plain data.

>>> compile_expression("variation.device != 'cpu' and inputs.n > 2").evaluate(
...     {"variation": {"device": "h100"}, "inputs": {"n": 4}})
True
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[type, Callable[[Any, Any], bool]], tuple[type, ...]]:
    """Comparison operators and the node types allowed in a condition."""
    compare: dict[type, Callable[[Any, Any], bool]] = {
        ast.Eq: operator.eq,
        ast.NotEq: operator.ne,
        ast.Lt: operator.lt,
        ast.LtE: operator.le,
        ast.Gt: operator.gt,
        ast.GtE: operator.ge,
        ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b,
        ast.Is: lambda a, b: a is b,
        ast.IsNot: lambda a, b: a is not b,
    }
    allowed = (
        ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare,
        ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Constant, ast.List, ast.Tuple,
        *compare,
    )
    return compare, allowed


class ExpressionError(ValueError):
    """An expression that is not allowed or cannot be evaluated."""


class _Missing:
    """Stands for a value that is absent; compares unequal to everything, is falsy."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "missing"


MISSING = _Missing()


class Expression(NamedTuple):
    """A parsed, checked expression; ``names`` are the root names it reads."""

    text: str
    tree: ast.Expression
    names: frozenset[str] = frozenset()

    def evaluate(self, context: Mapping[str, Any],
                 on_path: Callable[[tuple[str, ...], Any], None] | None = None) -> Any:
        """Evaluate over ``context``; ``on_path`` is told every dotted path read."""
        return _Evaluator(context, on_path).eval(self.tree.body)

    def references(self) -> list[tuple[str, str]]:
        """``(root, key)`` for every ``root.key`` / ``root['key']`` read, e.g.
        ``("inputs", "size")``, so a recipe can check them against what it declares."""
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.value, ast.Name):
                key = node.attr if isinstance(node, ast.Attribute) else node.slice.value  # type: ignore[attr-defined]
                found.append((node.value.id, str(key)))
        return found


@lru_cache(maxsize=4096)
def compile_expression(text: str) -> Expression:
    """Parse and check ``text``; raise ExpressionError naming what is not allowed."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error: {exc.msg}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            raise ExpressionError("function calls are not allowed")
        if not isinstance(node, _tables()[1]):
            raise ExpressionError(f"'{type(node).__name__}' is not allowed in a condition")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExpressionError(f"attribute '{node.attr}' is not allowed")
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            raise ExpressionError("only constant subscripts like x['key'] are allowed")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and not _is_number(node.operand):
            raise ExpressionError("unary minus is only allowed on a number, as in -1")
        if isinstance(node, ast.Name):
            names.add(node.id)
    return Expression(text, tree, frozenset(names))


def _is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


class _Evaluator:
    def __init__(self, context: Mapping[str, Any], on_path: Callable[[tuple[str, ...], Any], None] | None) -> None:
        self.context = context
        self.on_path = on_path

    def eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            return self._lookup(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.eval(e) for e in node.elts]
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return -self.eval(node.operand)  # a numeric constant (checked at compile time)
            return not self.eval(node.operand)
        if isinstance(node, ast.BoolOp):
            return self._boolop(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        raise ExpressionError(f"'{type(node).__name__}' is not allowed")  # pragma: no cover

    def _boolop(self, node: ast.BoolOp) -> Any:
        if isinstance(node.op, ast.And):
            value: Any = True
            for operand in node.values:
                value = self.eval(operand)
                if not value:
                    return value
            return value
        value = False
        for operand in node.values:
            value = self.eval(operand)
            if value:
                return value
        return value

    def _compare(self, node: ast.Compare) -> bool:
        left = self.eval(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator)
            try:
                ok = _tables()[0][type(op)](left, right)
            except TypeError:
                ok = False  # e.g. comparing a missing value with a number
            if not ok:
                return False
            left = right
        return True

    def _lookup(self, node: ast.AST) -> Any:
        path = _path_of(node)
        if path[0] not in self.context:
            known = ", ".join(sorted(self.context))
            raise ExpressionError(f"unknown name '{path[0]}' (known: {known})")
        value: Any = self.context[path[0]]
        for part in path[1:]:
            value = _get(value, part)
        if self.on_path is not None:
            self.on_path(path, value)
        return value


def _path_of(node: ast.AST) -> tuple[str, ...]:
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            assert isinstance(node.slice, ast.Constant)
            parts.append(str(node.slice.value))
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            raise ExpressionError(f"'{type(node).__name__}' cannot be indexed")


def _get(value: Any, key: str) -> Any:
    getter = getattr(value, "get_path", None)
    if getter is not None:
        return getter(key)
    if isinstance(value, Mapping):
        return value.get(key, MISSING)
    if isinstance(value, (list, tuple)) and key.isdigit():
        index = int(key)
        return value[index] if index < len(value) else MISSING
    return MISSING
