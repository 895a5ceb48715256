"""Print docs/architecture.md's layer diagram (mermaid), drawn from the code: one row per
layer of pyproject's import-linter contract, top to bottom, and an arrow for every package
that imports another (any import, type-only and in-function ones too).

    .venv/bin/python scripts/layers_diagram.py            # print the block
    .venv/bin/python scripts/layers_diagram.py --write    # replace it in docs/architecture.md

tests/test_architecture_doc.py fails when the document's block differs from this output.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cmx_core.testing.imports import import_graph

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin (scripts/layers_diagram.py) -->", "<!-- layers:end -->"
HELPERS = ("errors", "paths", "datautil", "reads")
"""Top-level modules every layer may use; drawn as one box, without arrows."""


def layer_rows() -> list[list[str]]:
    """The layers contract's rows (``a | b`` are siblings), read from pyproject.toml."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[name.strip() for name in row.split("|")] for row in contract["layers"]]


def package_edges() -> set[tuple[str, str]]:
    """(importer, imported) between cmx_core's subpackages."""
    def package(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else ""

    edges = set()
    for module, imported in import_graph(REPO / "cmx_core").items():
        for target in imported:
            a, b = package(module), package(target)
            if a and b and a != b and a not in (*HELPERS, "__main__") and b not in HELPERS:
                edges.add((a, b))
    return edges


def diagram() -> str:
    rows = layer_rows()
    lines = [BEGIN, "```mermaid", "flowchart TB"]
    for number, row in enumerate(rows):
        lines.append(f"  subgraph L{number}[\" \"]")
        lines.extend(f"    {name}" for name in row)
        lines.append("  end")
    lines.append(f"  helpers[\"{' · '.join(HELPERS)}\"]")
    lines.extend(f"  {a} --> {b}" for a, b in sorted(package_edges()))
    lines += ["```", END]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    block = diagram()
    if argv[1:] != ["--write"]:
        print(block)
        return 0
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(head + block + tail, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
