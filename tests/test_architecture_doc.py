"""docs/architecture.md stays true: its diagram is the one scripts/layers_diagram.py draws
from the code today, and its table names every layer of the import-linter contract."""

from __future__ import annotations

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
