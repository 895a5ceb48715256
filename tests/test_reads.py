"""The read recorder (cmx_core.reads): the stages that read report what they read, into one
log, which is what the warm-run memo is made of."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cmx_core import reads
from cmx_core.cache.store import META
from cmx_core.run import engine

RECIPE = """
name: reader
tags: [reader]
summary: reads a path input, a host variable and a fact
inputs:
  data: {type: path}
steps:
  - uses: shell
    with: {cmd: [sh, -c, 'echo v=$1', sh, "{{ facts.os.name }}"], parse: kv, env_allow: [CMX_TEST_READ]}
outputs:
  v: {}
"""


def test_every_stage_reports_what_it_read(tmp_path: Path, cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "reader.yaml").write_text(RECIPE)
    data = tmp_path / "data.txt"
    data.write_text("x")
    monkeypatch.setenv("CMX_TEST_READ", "1")
    engine.run_tags("reader", {"data": str(data)}, recipes_dirs=[recipes])  # fills the cache
    with reads.recording() as log:
        result = engine.run_tags("reader", {"data": str(data)}, recipes_dirs=[recipes])
    entry = next(iter((cmx_home / "cache" / "entries").glob(f"*/*/{META}")))
    assert str(recipes.resolve() / "reader.yaml") in log.files  # the catalog
    assert str(entry) in log.files  # the cache
    assert str(data) in log.files  # the planner: a path input
    assert log.env["CMX_TEST_READ"] == "1"  # the planner: a variable steps let through
    assert "os" in log.facts and log.facts["os"]["name"] == "os"  # the fact store
    assert str(recipes.resolve()) in log.links
    assert result.status == "completed" and log.refused == [] and log.changed_since() is None
    data.write_text("changed")
    assert log.changed_since() == f"{data} changed while the run went on"


def test_nothing_is_recorded_outside_a_recording(tmp_path: Path) -> None:
    reads.file(tmp_path)
    reads.env("HOME")
    reads.refuse("no log to refuse into")
    assert reads.active() is None


def test_a_facts_file_makes_the_run_unreplayable() -> None:
    facts = Path(__file__).resolve().parent.parent / "examples" / "facts" / "h100-sxm-8x.json"
    with reads.recording() as log:
        engine.plan("detect,os", facts_file=facts)
    assert "facts come from a facts file" in log.refused


def test_first_state_wins_and_later_changes_are_caught(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with reads.recording() as log:
        reads.file(path)  # absent when first read
        path.write_text("now here")
        reads.file(path)
    assert log.files[str(path)] == [str(path), None, None, None]
    assert log.changed_since() == f"{path} changed while the run went on"
    os.unlink(path)
    assert log.changed_since() is None
