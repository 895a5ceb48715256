"""No plugin asks the process-wide registry for what it needs (issue 42): an executor is
handed an ExecutionContext (plan, settings, facts, registry), a command its namespace's
``cmx_registry``, a step its StepContext. ``get_registry(`` in a plugin's source fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def service_locator_calls(source: str) -> list[int]:
    """The lines of ``source`` that call ``get_registry`` (by name or as an attribute)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            called = node.func
            name = called.id if isinstance(called, ast.Name) else called.attr if isinstance(called, ast.Attribute) \
                else None
            if name == "get_registry":
                lines.append(node.lineno)
    return lines


def test_the_scan_finds_a_call_in_each_spelling() -> None:
    assert service_locator_calls("from cmx_core.api import get_registry\nget_registry().steps\n") == [2]
    assert service_locator_calls("import cmx_core.api as api\nx = api.get_registry(strict=True)\n") == [2]
    assert service_locator_calls("registry = context.registry\n") == []


def test_no_plugin_source_calls_get_registry() -> None:
    sources = sorted(ROOT.glob("plugins/*/src/**/*.py"))
    assert len(sources) > 50, "the plugins' sources were not found"
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sources
             for line in service_locator_calls(path.read_text(encoding="utf-8"))]
    assert found == [], "plugins call the process-wide registry; take it from the ExecutionContext, the " \
        f"command's namespace (cmx_registry) or the StepContext instead: {found}"
