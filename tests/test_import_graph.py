"""cmx_core and every plugin import their own modules without a circle. Every import is an
edge: at module level, inside a function, and under ``if TYPE_CHECKING:`` alike, and a
package's ``__init__`` is a module like the others. The graph of each package has no
strongly connected component of more than one module: stages are handed what they need
instead of reaching back up for it (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cmx_core.testing.imports import cycles, import_graph, undeclared_deferrals

REPO = Path(__file__).resolve().parent.parent
PACKAGES = {"cmx_core": REPO / "cmx_core"} | {
    package.name: package for src in sorted((REPO / "plugins").glob("*/src")) for package in src.iterdir()
    if (package / "__init__.py").is_file()
}
TOP_LEVEL_ALLOWED = {"__init__", "__main__", "errors", "paths", "datautil", "reads"}
"""cmx_core's top-level modules: the package, ``python -m``, the errors and three small
helpers every layer uses (state paths, plain-data helpers, the read recorder); the layers
issue allows at most three beside ``__init__``, ``__main__``, ``api`` and ``errors``. The
public API is the package ``api/`` (its one table and the helper submodules)."""


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle(package: str) -> None:
    graph = import_graph(PACKAGES[package])
    assert sum(len(edges) for edges in graph.values()) > 0  # the walk sees imports at all
    assert cycles(graph) == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_function_level_import_says_why_it_is_deferred(package: str) -> None:
    """Imports live at module level (the graph above has no circle to break); one inside a
    function is kept only to keep a heavy module out of start-up, and says so."""
    assert undeclared_deferrals(PACKAGES[package]) == []


def test_an_import_in_a_function_without_a_reason_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "def f():\n    import json\n    return json\n\n\n"
        "def g():\n    import torch  # deferred: heavy, only this step needs it\n    return torch\n\n\n"
        "def h():\n    # deferred: start-up\n    import yaml\n    return yaml\n")
    assert undeclared_deferrals(package) == [f"{package / 'a.py'}:2"]


def test_type_checking_and_function_imports_are_edges(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import X\n")
    (package / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg", "pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_cmx_core_top_level_holds_only_the_api_errors_and_three_helpers() -> None:
    top = {p.stem for p in (REPO / "cmx_core").glob("*.py")}
    assert top == TOP_LEVEL_ALLOWED
    assert (REPO / "cmx_core" / "api" / "__init__.py").is_file()
    for helper in ("paths", "datautil", "reads"):  # helpers import no layer
        assert not any(t.startswith("cmx_core.") for t in import_graph(REPO / "cmx_core")[f"cmx_core.{helper}"])


def test_every_layer_package_says_what_it_owns_and_may_import() -> None:
    for init in sorted((REPO / "cmx_core").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc) > 60, f"{init} has no docstring saying what the package owns"
