"""Derived settings are code, not copied Jinja: across every shipped recipe (the repository's
``recipes/`` and every in-tree plugin's), no template expression longer than 120 characters
appears twice in one recipe file (issue 37; docs/mlperf-vllm.md "Derived settings")."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMIT = 120
# a run of adjacent {{ }} / {% %} blocks is one expression (a {% set %} program counts whole)
_EXPRESSION = re.compile(r"(?:\{\{.*?\}\}|\{%.*?%\})+", re.DOTALL)


def shipped_recipes() -> list[Path]:
    found = sorted((REPO / "recipes").rglob("*.yaml"))
    found += sorted(p for p in (REPO / "plugins").glob("*/src/*/recipes/**/*.yaml"))
    return found


def repeated_long_expressions(text: str, limit: int = LIMIT) -> dict[str, int]:
    counts = Counter(m.group(0) for m in _EXPRESSION.finditer(text))
    return {expr: n for expr, n in counts.items() if n > 1 and len(expr) > limit}


def test_the_scan_finds_recipes_including_the_llama_one() -> None:
    names = {p.name for p in shipped_recipes()}
    assert len(names) > 10 and "llama.yaml" in names


def test_the_check_catches_a_copied_program() -> None:
    program = "{% set g = facts.gpus.devices | length %}" * 4 + "{{ g }}"
    text = f'a: "{program}"\nb: "{program}"\nc: "{{{{ short }}}}"\nd: "{{{{ short }}}}"\n'
    assert list(repeated_long_expressions(text).values()) == [2]  # the short one may repeat


@pytest.mark.parametrize("path", shipped_recipes(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_long_expression_is_copied(path: Path) -> None:
    repeated = repeated_long_expressions(path.read_text())
    assert not repeated, f"{path}: name it once (a template function or a YAML anchor): {list(repeated)}"
