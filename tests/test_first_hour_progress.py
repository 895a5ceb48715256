"""Piped, a run says on stderr when each node starts and finishes (#18 item 9); stdout keeps
only the summary, and -q silences the progress."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

LIVE = re.compile(r"cmx: \S+/\S+ \(\S+\) \d+\.\d s")  # a step's live line, should a busy box make it slow

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
    lines = [ln for ln in result.err_lines if ln.startswith("cmx: ") and not LIVE.match(ln)]
    assert lines[0] == "cmx: running leaf (leaf)"
    assert lines[1].startswith("cmx: done leaf (") and lines[1].endswith(" s)")
    assert lines[2] == "cmx: running top (top)" and lines[3].startswith("cmx: done top (")
    assert "cmx:" not in result.out
    assert not [ln for ln in cli("run", "-q", "--recipes", str(recipes.dir), "--tags=top").err_lines
                if ln.startswith("cmx: ")]


LOGGING = """
name: logs
tags: [logs]
summary: a python step that reports progress through ctx.log
cache: false
steps:
  - {uses: python, with: {function: "cmx_logs_step:work"}}
"""


def test_a_steps_log_lines_are_progress_lines_on_stderr(cli: Callable[..., Any], tmp_path: Path) -> None:
    directory = tmp_path / "recipes" / "logs"
    directory.mkdir(parents=True)
    (directory / "recipe.yaml").write_text(LOGGING)
    (directory / "cmx_logs_step.py").write_text("def work(ctx):\n    ctx.log.info('halfway: %d of %d', 1, 2)\n"
                                                "    return {}\n")
    result = cli("run", "--recipes", str(tmp_path / "recipes"), "--tags=logs")
    assert result.code == 0, result.err
    assert "cmx: halfway: 1 of 2" in result.err_lines
    quiet = cli("run", "-q", "--recipes", str(tmp_path / "recipes"), "--tags=logs")
    assert quiet.code == 0 and "cmx: halfway: 1 of 2" not in quiet.err_lines
