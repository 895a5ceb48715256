"""`cmx sweep` prints each point's warnings beside it on stderr (issue 43): its result's noise
warnings (the ``conditions`` section) and its ``notes`` (cmx-train's suspect
``scaling_efficiency`` with its likely causes); ``--json`` keeps stdout one document, whose
points carry the same ``warnings``. `cmx run`'s summary shows the notes too."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.sweep.batch import point_warnings

NOTE = "scaling_efficiency 9.51 is above 1.05 and suspect: the 1-process point ran with 2 threads"
STEP = f'''
from cmx_core.api import Metric, ResultPart, StepOutput


def noted(ctx):
    part = ResultPart(status="valid", benchmark={{"suite": "custom", "task": "noted", "primary_metric": "n"}},
                      metrics={{"n": Metric(float(ctx.inputs["n"]), "items", True)}}, notes={NOTE!r})
    return StepOutput(outputs={{}}, result=part)
'''
RECIPE = """
name: noted
tags: [noted]
summary: a step whose result carries a note
inputs:
  n: {type: integer, default: 1}
steps:
  - {uses: python, measures: true, with: {function: "noted_step:noted"}}
"""


@pytest.fixture
def noted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recipe directory with the noted recipe; its step module importable by the points."""
    (tmp_path / "noted_step.py").write_text(STEP)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "noted.yaml").write_text(RECIPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    return recipes


def test_each_point_prints_its_notes_and_json_stays_one_document(cli: Callable[..., Any], noted: Path) -> None:
    done = cli("sweep", "--tags=noted", "--recipes", noted, "--matrix", "n=1,2", "--json")
    assert done.code == 0, done.err
    sweep = json.loads(done.out)  # one document
    assert [NOTE in p["warnings"] for p in sweep["points"]] == [True, True]
    assert done.err.count(f"  warning: {NOTE}") == 2, done.err
    lines = done.err.splitlines()
    for index in (1, 2):  # each point's warning follows its own line
        at = next(i for i, line in enumerate(lines) if f"point {index}/2" in line)
        assert lines[at + 1].startswith("  warning: ")


def test_run_summary_shows_the_notes(cli: Callable[..., Any], noted: Path) -> None:
    done = cli("run", "recipe", "--tags=noted", "--recipes", noted)
    assert done.code == 0, done.err
    assert "note: scaling_efficiency 9.51 is above 1.05 and suspect" in " ".join(done.out.split())


def test_point_warnings_reads_conditions_then_notes() -> None:
    document = {"conditions": {"warnings": [{"cause": "outside_cores", "message": "other processes used 1.4"}]},
                "notes": NOTE}
    assert point_warnings(document) == ("other processes used 1.4", NOTE)
    assert point_warnings({"notes": ""}) == ()
