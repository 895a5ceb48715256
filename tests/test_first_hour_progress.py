"""Piped, a run says on stderr when each node starts and finishes (#18 item 9); stdout keeps
only the summary, and -q silences the progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LEAF = """
name: leaf
tags: [leaf]
summary: a dep
cache: false
steps:
  - {uses: shell, with: {cmd: ["true"]}}
"""
TOP = """
name: top
tags: [top]
summary: uses the leaf
cache: false
deps: [{tags: [leaf]}]
steps:
  - {uses: shell, with: {cmd: ["true"]}}
"""


def test_a_line_per_node_start_and_finish(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("leaf", LEAF)
    recipes("top", TOP)
    result = cli("run", "--recipes", str(recipes.dir), "--tags=top")
    assert result.code == 0, result.err
    lines = [ln for ln in result.err_lines if ln.startswith("cmx: ")]
    assert lines[0] == "cmx: running leaf (leaf)"
    assert lines[1].startswith("cmx: done leaf (") and lines[1].endswith(" s)")
    assert lines[2] == "cmx: running top (top)" and lines[3].startswith("cmx: done top (")
    assert "cmx:" not in result.out
    assert not [ln for ln in cli("run", "-q", "--recipes", str(recipes.dir), "--tags=top").err_lines
                if ln.startswith("cmx: ")]
