"""Import graphs of a package, for checks that it has no import circle (the conformance kit
offers them to plugin authors; cmx-core checks itself and every in-tree plugin with them).

Every import is an edge: at module level, inside a function and under ``if TYPE_CHECKING:``
alike, and a package's ``__init__`` is a module like the others. Example::

    from cmx_core.testing.imports import cycles, import_graph

    def test_no_import_cycle():
        assert cycles(import_graph(Path("src/cmx_hello"))) == []
"""

from __future__ import annotations

import ast
from pathlib import Path


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _nearest(name: str, modules: set[str]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (any import, anywhere)."""
    paths = {_module_name(root, p): p for p in root.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found = (_nearest(t, modules) for t in _targets(name, path.name == "__init__.py", node))
                graph[name].update(t for t in found if t is not None and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


DEFERRED = "# deferred:"
"""The marker of a deliberate function-level import, followed by its reason (start-up speed)."""


def undeclared_deferrals(root: Path) -> list[str]:
    """``path:line`` of each import inside a function under ``root`` without a ``# deferred:``
    reason on its line or the line above. An import belongs at module level unless deferring it
    keeps a heavy module out of start-up; the comment says which and why."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for function in ast.walk(ast.parse(text)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    here = lines[node.lineno - 1]
                    above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                    if DEFERRED not in here and not above.startswith(DEFERRED):
                        found.append(f"{path}:{node.lineno}")
    return sorted(set(found))
