"""Meta-tests (datasette style): every hookspec is documented with an example and tested.

A new hook fails here until its hookspec docstring has an ``Example::`` block implementing
it with the spec's argument names, ``docs/plugins.md`` has a section with an example, and
some test outside this file exercises it.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from cmx_core.plugins import hookspecs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "plugins.md"


def _hookspecs() -> dict[str, object]:
    marker = f"{hookspecs.PROJECT}_spec"
    return {name: fn for name, fn in vars(hookspecs).items()
            if callable(fn) and hasattr(fn, marker)}


HOOKS = _hookspecs()


def _example(doc: str) -> str:
    """The indented block after ``Example::`` in a docstring."""
    _, _, rest = doc.partition("Example::")
    lines = []
    for line in rest.splitlines()[1:]:
        if line.strip() and not line.startswith((" ", "\t")):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines)).strip()


def _impl_args(code: str, hook: str) -> list[str] | None:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef) and node.name == hook:
            return [a.arg for a in node.args.args]
    return None


def test_hookspecs_are_found_and_prefixed() -> None:
    assert len(HOOKS) >= 9, sorted(HOOKS)
    public = [n for n, f in vars(hookspecs).items() if inspect.isfunction(f)
              and f.__module__ == hookspecs.__name__ and not n.startswith("_")]
    assert sorted(public) == sorted(HOOKS), "every public function in hookspecs is a hookspec"
    assert all(name.startswith("cmx_") for name in HOOKS)


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_hookspec_docstring_has_a_matching_example(hook: str) -> None:
    spec = HOOKS[hook]
    doc = inspect.getdoc(spec) or ""
    summary = doc.split("\n\n")[0]
    assert summary.strip(), f"{hook}: the hookspec has no docstring"
    assert "Example::" in doc, f"{hook}: the docstring has no 'Example::' block"
    example = _example(doc)
    assert "@hookimpl" in example, f"{hook}: the example does not show @hookimpl"
    args = _impl_args(example, hook)
    assert args is not None, f"{hook}: the example does not define {hook}()"
    expected = list(inspect.signature(spec).parameters)
    assert args == expected, f"{hook}: the example takes {args}, the hookspec {expected}"


def _doc_sections() -> dict[str, str]:
    text = DOCS.read_text(encoding="utf-8")
    parts = re.split(r"^### (\w+)\s*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))  # re.split gives [head, name, body, name, body, ...]


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_hook_has_a_docs_section_with_an_example(hook: str) -> None:
    sections = _doc_sections()
    assert hook in sections, f"docs/plugins.md has no '### {hook}' section"
    blocks = re.findall(r"```python\n(.*?)```", sections[hook], flags=re.DOTALL)
    assert blocks, f"docs/plugins.md: section {hook} has no python example"
    args = _impl_args("\n".join(blocks), hook)
    assert args == list(inspect.signature(HOOKS[hook]).parameters), (
        f"docs/plugins.md: the {hook} example does not implement the hook's arguments")


def _test_sources() -> dict[Path, str]:
    roots = [ROOT / "tests", *ROOT.glob("plugins/*/tests"), *ROOT.glob("examples/*/tests")]
    me = Path(__file__).resolve()
    return {p: p.read_text(encoding="utf-8") for root in roots for p in root.rglob("*.py")
            if p.resolve() != me}


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_hook_is_exercised_by_a_test(hook: str) -> None:
    pattern = re.compile(rf"\b{hook}\b")
    users = [p for p, text in _test_sources().items() if pattern.search(text)]
    assert users, f"no test implements or calls {hook}; add one (see tests/test_plugins_hooks.py)"
