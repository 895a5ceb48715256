"""Which ``cmind.access`` actions a collection's ``customize.py`` files call: every dict literal
with a constant ``action`` and ``automation`` (CM's call, or the input a script builds for
one), read with :mod:`ast`, never run. docs/cm-bridge.md's table of served actions and the
scripts each unlocks is counted with it (``test_cm_vs_cm.py``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from cmx_cm.served import SERVED_CALLS

Call = tuple[str, str]
"""(automation alias, action)."""


def calls_in(source: str) -> set[Call]:
    """The (automation, action) pairs of the dict literals in ``source``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return set(_calls(tree))


def _calls(tree: ast.AST) -> Iterator[Call]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        fields = {k.value: v.value for k, v in zip(node.keys, node.values, strict=True)
                  if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)}
        if "action" in fields and "automation" in fields:
            yield str(fields["automation"]).split(",")[0], str(fields["action"])


def scan(root: Path) -> Mapping[str, set[Call]]:
    """Script directory name -> the actions its ``customize.py`` calls (scripts that call none
    are left out)."""
    files = sorted(root.glob("*/customize.py"))
    found = {path.parent.name: calls_in(path.read_text(errors="replace")) for path in files}
    return {name: calls for name, calls in found.items() if calls}


def served(calls: set[Call]) -> bool:
    return calls <= set(SERVED_CALLS)
