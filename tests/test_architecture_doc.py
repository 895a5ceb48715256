"""docs/architecture.md stays true: its diagram is the one scripts/layers_diagram.py draws
from the code today, and its table names every layer of the import-linter contract."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"


def _drawn() -> str:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "layers_diagram.py")], capture_output=True,
                          text=True, check=True, timeout=120)
    return done.stdout.strip()


def test_the_diagram_is_drawn_from_todays_code() -> None:
    drawn = _drawn()
    assert drawn in DOC.read_text(encoding="utf-8"), "run: .venv/bin/python scripts/layers_diagram.py --write"
    assert "  run --> plugins" in drawn and "  plugins --> run" not in drawn  # arrows point down


def test_the_table_names_every_layer_package() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from layers_diagram import layer_rows
    finally:
        sys.path.pop(0)
    text = DOC.read_text(encoding="utf-8")
    for row in layer_rows():
        for name in row:
            assert f"`{name}/`" in text or f"`{name}.py`" in text, name


def test_the_cli_imports_the_layers_the_doc_names_and_no_others() -> None:
    text = DOC.read_text(encoding="utf-8")
    listed = text.split("<!-- cli-layers -->", 1)[1].split("<!-- /cli-layers -->", 1)[0]
    documented = {name.strip("`") for name in listed.replace("\n", " ").split(", ")}
    imported: set[str] = set()
    for module in (REPO / "cmx_core" / "cli").glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                parts = name.split(".")
                if parts[0] == "cmx_core" and len(parts) > 1:
                    imported.add(parts[1])
    helpers = {"errors", "paths", "datautil", "reads", "cli"}
    assert imported - helpers == documented, "update the CLI's layer list in docs/architecture.md"
    assert not imported & {"api", "testing", "builtin", "catalog", "facts", "sandbox", "models"}


def test_the_readme_layout_names_every_package_of_cmx_core() -> None:
    row = next(line for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `cmx_core/` |"))
    packages = sorted(p.parent.name for p in (REPO / "cmx_core").glob("*/__init__.py"))
    missing = [name for name in packages if f"`{name}/`" not in row]
    assert not missing, f"README's Layout row for cmx_core/ misses {missing}"


def test_the_readme_layout_has_a_row_for_every_plugin_and_every_row_exists() -> None:
    """#50 item 5: the Layout table listed 3 of the 10 plugins."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("`")[1] for line in layout.splitlines() if line.startswith("| `")]
    plugins = sorted(f"plugins/{p.parent.name}" for p in (REPO / "plugins").glob("*/pyproject.toml"))
    assert [p for p in plugins if p not in rows] == [], "add a README Layout row for each plugin"
    assert [r for r in rows if not (REPO / r).exists()] == []
