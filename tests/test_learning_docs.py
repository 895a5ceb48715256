"""docs/learning.md's worked example, run as written (real demo-sort runs), and its numbers
held to the code."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from cmx_core.cli.sweep_search_cmd import DEFAULT_CONFIRM, DEFAULT_SHARE, default_sampler
from cmx_core.results.predict import MIN_RUNS
from cmx_core.sweep.confirm import APART
from cmx_core.sweep.request import POLL_S
from cmx_core.sweep.search import startup_trials
from cmx_core.sweep.search_spec import SAMPLERS

DOC = Path(__file__).resolve().parents[1] / "docs" / "learning.md"


def _example() -> list[list[str]]:
    block = re.search(r"## A worked example\n\n```bash\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None, "docs/learning.md lost its worked example"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "CMX_HOME": str(tmp_path), "COLUMNS": "80"}
    said = []
    for argv in _example():
        assert argv[0] == "cmx"
        done = subprocess.run([sys.executable, "-m", "cmx_core", *argv[1:]], env=env, capture_output=True, text=True,
                              timeout=900, stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 0, (argv, done.stderr[-2000:])
        said.append(" ".join(done.stdout.split()))
    search, predicted, suggested = said
    assert "5 of 8 points measured" in search and "best: " in search
    assert "noise units apart" in search or "noise unknown" in search
    # the 5 points, and 2 confirmation runs of each of the best two
    assert "learnt from 9 runs of demo-sort" in predicted and "size=3000" in predicted
    assert suggested.count("cmx run recipe --tags=demo,sort --size=") == 3
    sweeps = tmp_path / "data" / "sweeps"
    manifest = json.loads(next(sweeps.glob("sw-*.json")).read_text())
    assert len(manifest["points"]) == 5


def test_the_docs_numbers_are_the_codes() -> None:
    text = " ".join(DOC.read_text().split())
    assert f"default: {DEFAULT_SHARE:.0%}".replace("%", " %") in text and "at least 4 runs" in text
    assert f"fewer than {MIN_RUNS} comparable runs" in text
    assert "an eighth of the grid, between 3 and 10" in text
    assert [startup_trials(n) for n in (8, 48, 80, 400)] == [3, 6, 10, 10]
    assert "`--sampler tpe` / `gp`" in text and SAMPLERS == ("tpe", "gp")
    assert default_sampler() == ("gp" if importlib.util.find_spec("torch") else "tpe")
    assert POLL_S == 0.2 and "reads it every 0.2 s" in text
    assert DEFAULT_CONFIRM == 2 and "(default 2; 0: none)" in text and "default 2: three values each" in text
    assert APART == 2 and "2 units or more" in text
