"""``cmx results export`` never replaces what it is pointed at: ``-`` is stdout, a symlink is
written through, a FIFO is written to; ``--all``/``--recipe``/``--since``/``--status`` select
runs (#18 item 4)."""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.results import ResultStore, write_result
from cmx_core.results.examples import example_document, mlperf_part


def _index(run_id: str, status: str = "valid") -> None:
    run_dir = paths.runs_dir() / run_id
    part = mlperf_part()
    doc = example_document(run_dir, run_id=run_id, part=part)
    doc["status"] = status
    if status == "invalid":
        doc["invalid_reasons"] = ["INVALID: min duration not met"]
    path = write_result(run_dir, doc, suites=None)
    ResultStore(paths.results_db()).index(doc, path)


@pytest.fixture
def runs() -> list[str]:
    _index("run-one")
    _index("run-two", status="invalid")
    return ["run-one", "run-two"]


def test_dash_is_stdout(cli: Callable[..., Any], runs: list[str]) -> None:
    result = cli("results", "export", "--format", "csv", "-", "run-one")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert [r["run_id"] for r in rows] == ["run-one"]
    assert "exported 1 run(s)" in result.err
    assert not Path("-").exists()


def test_dash_with_json_is_refused(cli: Callable[..., Any], runs: list[str]) -> None:
    result = cli("results", "export", "--format", "csv", "-", "run-one", "--json")
    assert result.code == 2 and "drop --json" in result.err


def test_symlink_is_written_through(cli: Callable[..., Any], runs: list[str], tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = cli("results", "export", "--format", "json", str(link), "run-one")
    assert result.code == 0, result.err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [d["run_id"] for d in json.loads(target.read_text())] == ["run-one"]


def test_fifo_is_written_to_not_replaced(cli: Callable[..., Any], runs: list[str], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as stream:
            received.append(stream.read())

    reader = threading.Thread(target=read)
    reader.start()
    result = cli("results", "export", "--format", "csv", str(fifo), "run-one")
    reader.join(timeout=30)
    assert result.code == 0, result.err
    assert fifo.is_fifo()
    assert b"run-one" in received[0]


def test_device_is_written_to(cli: Callable[..., Any], runs: list[str]) -> None:
    result = cli("results", "export", "--format", "json", "/dev/null", "run-one")
    assert result.code == 0, result.err
    assert Path("/dev/null").is_char_device()


def test_filters(cli: Callable[..., Any], runs: list[str]) -> None:
    every = cli("results", "export", "--format", "csv", "-", "--all")
    assert sorted(r["run_id"] for r in csv.DictReader(io.StringIO(every.out))) == runs
    invalid = cli("results", "export", "--format", "csv", "-", "--status", "invalid")
    assert [r["run_id"] for r in csv.DictReader(io.StringIO(invalid.out))] == ["run-two"]
    recent = cli("results", "export", "--format", "csv", "-", "--since", "1d")
    assert len(list(csv.DictReader(io.StringIO(recent.out)))) == 2
    future = cli("results", "export", "--format", "csv", "-", "--since", "2999-01-01")
    assert future.code == 2 and "no indexed run matches" in future.err


@pytest.mark.parametrize(("args", "wanted"), [
    ([], "give run ids, or --all"),
    (["run-one", "--all"], "not both"),
    (["--since", "yesterday"], "--since 'yesterday'"),
])
def test_bad_selection(cli: Callable[..., Any], runs: list[str], args: list[str], wanted: str) -> None:
    result = cli("results", "export", "--format", "csv", "-", *args)
    assert result.code == 2 and wanted in result.err
    assert len(result.err_lines) == 1
