"""No function in cmx_core or a plugin's ``src`` takes more than six parameters: a longer list
is a record waiting to be named (a frozen dataclass the caller builds). Counted from the source:
every ``def`` and ``async def`` (methods, nested functions) and every ``lambda``; a leading
``self`` or ``cls`` is not counted; ``*args`` and ``**kwargs`` count one each.

ALLOWED lists the exceptions, each with the reason it must keep its signature."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LIMIT = 6
ROOTS = [REPO / "cmx_core", *sorted((REPO / "plugins").glob("*/src"))]
ALLOWED = {
    "plugins/cm/src/cmx_cm/_shim/cmind/utils.py:load_txt":
        "mirrors CM's own public utils.load_txt signature, which CM scripts call by keyword",
}
"""``path:qualified name`` -> why it keeps more than LIMIT parameters."""

Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def count(args: ast.arguments) -> int:
    """The parameters of a signature: ``self``/``cls`` first is free, ``*args``/``**kwargs`` one each."""
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (args.vararg is not None) + (args.kwarg is not None)


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """(qualified name, node) of every function and lambda in ``tree``: ``Class.method``,
    ``outer.inner``, ``outer.<lambda>:LINE``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.Lambda):
            yield f"{prefix}<lambda>:{node.lineno}", node
            yield from functions(node, prefix)
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def offenders_in(text: str, where: str) -> dict[str, int]:
    """``where:qualified name`` -> parameter count, for each function over LIMIT in ``text``."""
    found = {}
    for name, node in functions(ast.parse(text)):
        params = count(node.args)
        if params > LIMIT:
            found[f"{where}:{name}"] = params
    return found


def offenders() -> dict[str, int]:
    found: dict[str, int] = {}
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            found |= offenders_in(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    return found


def test_no_function_takes_more_than_six_parameters() -> None:
    over = {name: params for name, params in offenders().items() if name not in ALLOWED}
    assert over == {}, "group these parameters into a typed record:\n" + "\n".join(
        f"  {params} {name}" for name, params in sorted(over.items(), key=lambda item: -item[1]))


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_every_allowed_entry_still_needs_its_place(name: str) -> None:
    assert name in offenders(), f"{name} takes at most {LIMIT} parameters now: drop it from ALLOWED"
    assert len(ALLOWED[name]) > 20, "say why it keeps its signature"


def test_the_counter_sees_methods_nested_functions_lambdas_and_star_args() -> None:
    source = (
        "def six(a, b, c, d, e, f): pass\n"
        "def seven(a, b, c, d, e, *args, **kwargs): pass\n"
        "def keywords(a, /, b, *, c, d, e, f, g): pass\n"
        "class K:\n"
        "    def method(self, a, b, c, d, e, f): pass\n"
        "    @classmethod\n"
        "    def build(cls, a, b, c, d, e, f, g): pass\n"
        "    async def later(self, a, b, c, d, e, f, g): pass\n"
        "def outer():\n"
        "    def inner(a, b, c, d, e, f, g): pass\n"
        "    return lambda a, b, c, d, e, f, g: a\n"
        "def self_free(this, a, b, c, d, e, f): pass\n"
    )
    assert offenders_in(source, "m.py") == {
        "m.py:seven": 7, "m.py:keywords": 7, "m.py:K.build": 7, "m.py:K.later": 7, "m.py:outer.inner": 7,
        "m.py:outer.<lambda>:11": 7, "m.py:self_free": 7}
