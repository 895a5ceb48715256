"""Writes the ``if TYPE_CHECKING:`` block of ``cmx_core/api/__init__.py`` from the one table
of the API's names, ``cmx_core/api/table.py`` (what type checkers read; the runtime lookup
is built from the table itself).

    .venv/bin/python scripts/api_table.py --write     # after adding a name to the table
    .venv/bin/python scripts/api_table.py --check     # exit 1 when the block is out of date

``tests/test_api_table.py`` runs the check.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from cmx_core.api.table import entries

INIT = Path(__file__).resolve().parents[1] / "cmx_core" / "api" / "__init__.py"
BEGIN = "if TYPE_CHECKING:  # written by scripts/api_table.py from cmx_core/api/table.py"


def block() -> str:
    """The block for the current table: one ``from MODULE import (...)`` per module, each name
    re-exported by its alias; a name exported under another one is an assignment, which type
    checkers export as they do an alias (``run = cmx_core.run.engine.run_tags``)."""
    by_module: dict[str, list[str]] = {}
    renamed: list[str] = []
    for module, attribute, name in entries():
        if attribute == name:
            by_module.setdefault(module, []).append(f"{name} as {name},")
        else:
            renamed.append(f"    {name} = {module}.{attribute}")
    lines = [BEGIN, "    # one import per module (the sorter keeps out)", "    # isort: off"]
    for module in sorted(by_module):
        lines += [f"    from {module} import (", *(f"        {n}" for n in sorted(by_module[module])), "    )"]
    modules = sorted({r.split(" = ")[1].rsplit(".", 1)[0] for r in renamed})
    lines += [f"    import {module}" for module in modules] + ["    # isort: on"] + sorted(renamed)
    return "\n".join(lines) + "\n"


def written(text: str) -> set[tuple[str, str, str]]:
    """(module, attribute, name) the file's block exports (order aside)."""
    found = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and item.module:
                    found |= {(item.module, a.name, a.asname or a.name) for a in item.names}
                elif isinstance(item, ast.Assign) and isinstance(item.value, ast.Attribute):
                    module = ast.unparse(item.value.value)
                    found |= {(module, item.value.attr, t.id) for t in item.targets if isinstance(t, ast.Name)}
    return found


def replace_block(text: str) -> str:
    """``text`` with the block from ``BEGIN`` to the next unindented line rewritten."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(BEGIN))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i].startswith(" "))
    while lines[end - 1].strip() == "":
        end -= 1
    return "".join(lines[:start]) + block() + "".join(lines[end:])


def main(argv: list[str]) -> int:
    text = INIT.read_text(encoding="utf-8")
    if argv == ["--check"]:
        want = set(entries())
        have = written(text)
        for module, attribute, name in sorted(want - have):
            print(f"{INIT}: missing `from {module} import {attribute} as {name}` (run --write)", file=sys.stderr)
        for module, attribute, name in sorted(have - want):
            print(f"{INIT}: `from {module} import {attribute} as {name}` is not in the table", file=sys.stderr)
        return int(want != have)
    if argv != ["--write"]:
        print(__doc__, file=sys.stderr)
        return 2
    INIT.write_text(replace_block(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
