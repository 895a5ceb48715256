"""write_result: validates first, writes atomically, leaves nothing behind on failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cmx_core.errors import ResultsError
from cmx_core.results import write_result
from cmx_core.results.examples import example_document
from cmx_core.results.suites import CUSTOM

SUITES = {"custom": CUSTOM}


def _leftovers(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if p.name != "result.json")


def test_write_creates_the_run_dir_and_reads_back(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    document = example_document(run_dir)
    path = write_result(run_dir, document, suites=SUITES)
    assert path == run_dir / "result.json"
    assert json.loads(path.read_text(encoding="utf-8")) == document
    assert _leftovers(run_dir) == []


def test_invalid_document_writes_nothing_and_keeps_the_old_file(tmp_path: Path) -> None:
    good = example_document(tmp_path)
    write_result(tmp_path, good, suites=SUITES)
    before = (tmp_path / "result.json").read_bytes()
    bad = dict(good, status="passed")
    with pytest.raises(ResultsError, match=r"result.json: invalid result document: \$\.status"):
        write_result(tmp_path, bad, suites=SUITES)
    assert (tmp_path / "result.json").read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_invalid_document_in_a_fresh_dir_leaves_no_file(tmp_path: Path) -> None:
    bad = example_document(tmp_path)
    del bad["timing"]
    with pytest.raises(ResultsError, match=r"must contain \['timing'\]"):
        write_result(tmp_path, bad, suites=SUITES)
    assert list(tmp_path.iterdir()) == []


def test_non_json_value_is_refused_before_writing(tmp_path: Path) -> None:
    document = example_document(tmp_path)
    document["outputs"] = {"weights": {1.5, 2.5}}  # free-form outputs, but still JSON only
    with pytest.raises(ResultsError, match=r"result document is not JSON data"):
        write_result(tmp_path, document, suites=SUITES)
    assert list(tmp_path.iterdir()) == []


def test_failed_rename_removes_the_temp_file_and_keeps_the_old_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_result(tmp_path, example_document(tmp_path), suites=SUITES)
    before = (tmp_path / "result.json").read_bytes()

    def fail_replace(src: str, dst: str) -> None:  # fault injection: the disk fills up
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail_replace)
    with pytest.raises(ResultsError, match=r"result.json: cannot write \(No space left on device\)"):
        write_result(tmp_path, example_document(tmp_path, outputs={"os": "changed"}), suites=SUITES)
    monkeypatch.undo()
    assert (tmp_path / "result.json").read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_interrupt_during_write_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_result(tmp_path, example_document(tmp_path), suites=SUITES)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_run_dir_that_is_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("not a directory")
    with pytest.raises(ResultsError, match=r"cannot (create directory|write)"):
        write_result(blocker / "inner", example_document(tmp_path), suites=SUITES)
