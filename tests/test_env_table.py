"""Every ``CMX_*`` variable the sources name is in docs/environment.md's table (#18 item 8)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"""["'](CMX_[A-Z0-9_]+)["']""")


def _named_in_sources() -> set[str]:
    files = [*ROOT.joinpath("cmx_core").rglob("*.py"), *ROOT.glob("plugins/*/src/**/*.py")]
    return {name for path in files for name in NAME.findall(path.read_text(encoding="utf-8"))}


def _documented() -> set[str]:
    text = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(CMX_[A-Z0-9_]+)` \|", text, re.MULTILINE))


def test_every_variable_is_documented() -> None:
    named = _named_in_sources()
    assert "CMX_SYSTEM_TYPE" in named and "CMX_NUMBER_OF_NODES" in named  # the grep works
    missing = named - _documented()
    assert not missing, f"add to docs/environment.md: {sorted(missing)}"


def test_no_stale_rows() -> None:
    stale = _documented() - _named_in_sources()
    assert not stale, f"docs/environment.md lists variables nothing reads: {sorted(stale)}"
