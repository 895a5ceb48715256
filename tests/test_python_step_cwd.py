"""A python step runs in its work directory, as a shell step does: its relative writes never
land in the user's current directory (#17 item 8)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

RECIPE = """
name: writes-here
tags: [writes, here]
summary: a python step that writes a relative file
steps:
  - uses: python
    with: {function: "cmx_test_writer:write"}
outputs:
  cwd: {description: where the function ran}
  work_dir: {description: the step's work directory}
"""

WRITER = """
import os
from pathlib import Path

def write(ctx):
    Path("relative.txt").write_text("from the step")
    return {"cwd": os.getcwd(), "work_dir": str(ctx.work_dir)}
"""


def test_a_python_step_writes_into_its_work_dir(cli: Callable[..., Any], recipes: Callable[[str, str], Path],
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_dir = tmp_path / "modules"
    module_dir.mkdir()
    (module_dir / "cmx_test_writer.py").write_text(WRITER)
    monkeypatch.syspath_prepend(str(module_dir))
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    monkeypatch.chdir(user_dir)
    recipes("writes-here", RECIPE)
    result = cli("run", "recipe", "--tags=writes,here", "--recipes", str(recipes.dir), "--json")  # type: ignore[attr-defined]
    assert result.code == 0, result.err
    outputs = json.loads(result.out)["outputs"]
    assert Path(outputs["cwd"]).resolve() == Path(outputs["work_dir"]).resolve()
    assert (Path(outputs["work_dir"]) / "relative.txt").read_text() == "from the step"
    assert not (user_dir / "relative.txt").exists() and os.getcwd() == str(user_dir)  # and cmx came back
    sys.modules.pop("cmx_test_writer", None)
