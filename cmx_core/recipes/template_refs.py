"""What a template reads, worked out without rendering it (for the plan-time checks).

:func:`template_info` returns the dotted names a template reads (``("inputs", "n")``,
``("deps", "model", "path")``) and whether its rendered value keeps a native type. The
common shapes (``{{ inputs.n }}``, ``--x={{ node.dir }}/out``, ``{{ 'a' if variation.d ==
'cpu' else 'b' }}``) are read by a small tokenizer, so a plan does not import Jinja2 for
them; anything else (filters, calls, subscripts, ``{% %}`` blocks) is parsed by the same
sandboxed Jinja2 environment that renders it. Results are cached per template text.

>>> template_info("{{ inputs.n if inputs.n > 0 else none }}").refs
(('inputs', 'n'),)
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from cmx_core.recipes.template import _environment

if TYPE_CHECKING:
    from jinja2 import nodes

Ref = tuple[str | int, ...]


class TemplateInfo(NamedTuple):
    """What one template string reads; ``error`` is a syntax or sandbox problem."""

    refs: tuple[Ref, ...]
    native: bool  # exactly one ``{{ expression }}``: the value keeps its type
    chain: Ref | None  # the whole template is ``{{ a.b.c }}``: that name
    error: str | None = None


class _Patterns(NamedTuple):
    block: re.Pattern[str]
    single: re.Pattern[str]
    string: re.Pattern[str]
    token: re.Pattern[str]
    chain: re.Pattern[str]


@lru_cache(maxsize=1)
def _patterns() -> _Patterns:
    """Compiled on first use: most commands never look at a template."""
    return _Patterns(
        re.compile(r"\{\{(.*?)\}\}", re.DOTALL),
        re.compile(r"^\{\{(.*)\}\}$", re.DOTALL),
        re.compile(r"'[^'\\{}]*'|\"[^\"\\{}]*\""),
        re.compile(r"\s+|\d+(?:\.\d+)?(?![\w.])|([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)|==|!=|<=|>=|[<>+\-*/%~()]"),
        re.compile(r"\s*[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\s*"),
    )

_CONSTANTS = frozenset({"and", "or", "not", "in", "if", "else", "none", "true", "false", "None", "True", "False"})
_KEYWORDS = _CONSTANTS | {"is", "for", "recursive", "with", "without", "context", "import", "as", "from",
                          "include", "block", "set", "endfor", "endif", "elif", "macro", "call", "filter"}


@lru_cache(maxsize=4096)
def template_info(text: str) -> TemplateInfo:
    """The names ``text`` reads, whether its value is native, and any syntax problem."""
    match = _patterns().single.match(text.strip())
    native = bool(match) and "{{" not in match.group(1) and "{%" not in text  # type: ignore[union-attr]
    refs = None if ("{%" in text or "{#" in text) else _fast_refs(text)
    if refs is None:
        return _jinja_info(text, native)
    chain = refs[0] if native and len(refs) == 1 and _is_chain(match.group(1)) else None  # type: ignore[union-attr]
    return TemplateInfo(tuple(refs), native, chain)


def _is_chain(expression: str) -> bool:
    return _patterns().chain.fullmatch(expression) is not None


def _fast_refs(text: str) -> list[Ref] | None:
    """The names read by a template of plain ``{{ }}`` blocks over names, literals,
    comparisons and ``if/else``; None when it needs the real parser."""
    patterns = _patterns()
    refs: list[Ref] = []
    for block in patterns.block.finditer(text):
        found = _expression_refs(patterns.string.sub(" 0 ", block.group(1)), patterns.token)
        if found is None:
            return None
        refs.extend(r for r in found if r not in refs)
    rest = patterns.block.sub("", text)
    return None if ("{{" in rest or "}}" in rest) else refs


def _expression_refs(expression: str, tokens: re.Pattern[str]) -> list[Ref] | None:
    refs: list[Ref] = []
    pos, end = 0, len(expression)
    while pos < end:
        token = tokens.match(expression, pos)
        if token is None:
            return None
        pos = token.end()
        name = token.group(1)
        if name is None:
            continue
        parts = name.split(".")
        if parts[0] in _CONSTANTS and len(parts) == 1:
            continue
        if any(p in _KEYWORDS or p.startswith("_") for p in parts) or expression[pos:].lstrip().startswith("("):
            return None  # a test, a call, a private name: the real parser decides
        refs.append(tuple(parts))
    return refs


def _jinja_info(text: str, native: bool) -> TemplateInfo:
    import jinja2  # deferred: jinja2 only when this runs (63 modules)
    from jinja2 import meta  # deferred: jinja2 only when this runs (63 modules)


    try:
        tree = _environment().parse(text)
        undeclared = meta.find_undeclared_variables(tree)  # compiles: an unknown filter or test fails here
    except jinja2.TemplateSyntaxError as exc:  # (a TemplateAssertionError is one too)
        return TemplateInfo((), native, None, f"template syntax error: {exc.message or exc}")
    walker = _Walker(frozenset(undeclared))
    walker.visit(tree)
    return TemplateInfo(tuple(dict.fromkeys(walker.refs)), native, None, walker.error)


class _Walker:
    """Collects the name chains a Jinja2 AST reads from the context."""

    _GUARD_TESTS = frozenset({"defined", "undefined"})
    _GUARD_FILTERS = frozenset({"default", "d"})

    def __init__(self, free: frozenset[str]) -> None:
        self.free = free
        self.refs: list[Ref] = []
        self.error: str | None = None
        self.guarded: list[Ref] = []  # ``x`` inside ``... if x is defined``: may be read

    def visit(self, node: nodes.Node) -> None:
        from jinja2 import nodes  # deferred: jinja2 only when this runs (63 modules)

        if isinstance(node, nodes.Test) and node.name in self._GUARD_TESTS:
            return  # ``x is defined`` may read what is not there
        if isinstance(node, (nodes.Test, nodes.Filter)) and self.error is None:
            known = _environment().tests if isinstance(node, nodes.Test) else _environment().filters
            if node.name not in known:  # Jinja defers an unknown test in an ``if`` to the run
                kind = "test" if isinstance(node, nodes.Test) else "filter"
                self.error = f"template syntax error: No {kind} named '{node.name}'."
        if isinstance(node, (nodes.CondExpr, nodes.If)) and node.test is not None:
            self._visit_guarded(node)
            return
        if isinstance(node, nodes.Filter) and node.name in self._GUARD_FILTERS and node.node is not None:
            self._visit_args(node)
            return
        if isinstance(node, nodes.Call):
            chain = _chain(node.node)
            if chain is not None and len(chain) > 1:
                self._record(chain[:-1])  # ``inputs.items()``: a method of the mapping
                self._visit_args(node)
                return
        if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            self._private(node.attr)
        chain = _chain(node)
        if chain is not None:
            self._record(chain)
            return
        for child in node.iter_child_nodes():
            self.visit(child)

    def _visit_guarded(self, node: nodes.CondExpr | nodes.If) -> None:
        """``a.b if a is defined else c``: the branch taken when ``a`` is defined may read it."""
        from jinja2 import nodes  # deferred: jinja2 only when this runs (63 modules)

        guards = [_chain(t.node) for t in _conjuncts(node.test) if isinstance(t, nodes.Test) and t.name == "defined"]
        self.visit(node.test)
        before = len(self.guarded)
        self.guarded.extend(g for g in guards if g is not None)
        taken: list[nodes.Node] = [node.expr1] if isinstance(node, nodes.CondExpr) else list(node.body)
        for branch in taken:
            self.visit(branch)
        del self.guarded[before:]
        rest: list[nodes.Node | None] = [node.expr2] if isinstance(node, nodes.CondExpr) else [*node.elif_, *node.else_]
        for other in rest:
            if other is not None:
                self.visit(other)

    def _visit_args(self, node: nodes.Call | nodes.Filter) -> None:
        for arg in (*node.args, *(kw.value for kw in node.kwargs), node.dyn_args, node.dyn_kwargs):
            if arg is not None:
                self.visit(arg)

    def _private(self, attr: str) -> None:
        self.error = self.error or f"templates may not read private attributes ('{attr}')"

    def _record(self, chain: Ref) -> None:
        for part in chain[1:]:
            if isinstance(part, str) and part.startswith("_"):
                self._private(part)
        if chain[0] in self.free and not any(chain[:len(g)] == g for g in self.guarded):
            self.refs.append(chain)


def _conjuncts(test: nodes.Node) -> list[nodes.Node]:
    """The parts of ``a and b and c``."""
    from jinja2 import nodes  # deferred: jinja2 only when this runs (63 modules)

    if isinstance(test, nodes.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _chain(node: nodes.Node) -> Ref | None:
    """``a.b['c'].d`` as ("a", "b", "c", "d"); None unless ``node`` is such a chain."""
    from jinja2 import nodes  # deferred: jinja2 only when this runs (63 modules)

    parts: list[str | int] = []
    while True:
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) \
                and isinstance(node.arg.value, (str, int)):
            parts.append(node.arg.value)
            node = node.node
        elif isinstance(node, nodes.Name) and node.ctx == "load":
            parts.append(node.name)
            return tuple(reversed(parts))
        else:
            return None
