"""Results listings never cut a value or a path: piped or narrow output is plain, ``--format``
picks table, plain, json or csv, the variant and given inputs are columns, ``--limit 0`` is
every run (#18 item 1). Since #33 the plain layout fits the terminal and ``--wide`` keeps
each row on one line."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.results import ResultStore, write_result
from cmx_core.results.examples import example_document, mlperf_part

BIG = 3505912.25
LONG_INPUT = "/data/" + "very-long-directory-name/" * 6 + "file.bin"


def _index(run_id: str, **inputs: Any) -> Path:
    run_dir = paths.runs_dir() / run_id
    doc = example_document(run_dir, run_id=run_id, part=mlperf_part(samples_per_second=BIG))
    doc["provenance"]["query"]["inputs"] = inputs
    doc["provenance"]["query"]["variations"] = {"fast": True, "batch": "8"}
    path: Path = write_result(run_dir, doc, suites=None)
    ResultStore(paths.results_db()).index(doc, path)
    return path


@pytest.fixture
def two_runs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.setenv("COLUMNS", "80")
    return [_index("run-aaaaaaaaaaaaaaaa", dataset=LONG_INPUT), _index("run-bbbbbbbbbbbbbbbb")]


def test_piped_list_is_plain_and_whole(cli: Callable[..., Any], two_runs: list[Path]) -> None:
    result = cli("results", "list", "--wide")  # whole rows; the default fits 80 columns (test_output_fits)
    assert result.code == 0, result.err
    assert "…" not in result.out and "┃" not in result.out
    assert "3,505,912.2 samples/s" in result.out
    assert f"dataset={LONG_INPUT}" in result.out
    header = result.out.splitlines()[0].split()
    assert header[:5] == ["run", "created", "(UTC)", "status", "recipe"] and "variant" in header
    assert "99" in result.out  # the benchmark's variant


def test_table_at_80_columns_folds_no_number(cli: Callable[..., Any], two_runs: list[Path]) -> None:
    result = cli("results", "list", "--format", "table")
    assert result.code == 0, result.err
    assert "…" not in result.out
    assert "3,505,912.2" in result.out


def test_csv_and_json_have_every_field(cli: Callable[..., Any], two_runs: list[Path]) -> None:
    result = cli("results", "list", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert {r["run"] for r in rows} == {"run-aaaaaaaaaaaaaaaa", "run-bbbbbbbbbbbbbbbb"}
    assert {r["inputs"] for r in rows} == {f"dataset={LONG_INPUT}", "-"}
    doc = json.loads(cli("results", "list", "--format", "json").out)
    assert {r["variant"] for r in doc["runs"]} == {"99"}
    assert {json.dumps(r["inputs"]) for r in doc["runs"]} == {json.dumps({"dataset": LONG_INPUT}), "{}"}
    assert json.loads(cli("results", "list", "--json").out) == doc


def test_limit_zero_is_every_run(cli: Callable[..., Any], two_runs: list[Path]) -> None:
    result = cli("results", "list", "--limit", "0", "--format", "csv")
    assert len(list(csv.DictReader(io.StringIO(result.out)))) == 2
    assert "no runs indexed yet" not in cli("results", "list", "--limit", "0").out
    assert "no runs match" in cli("results", "list", "--status", "error").out
    bad = cli("results", "list", "--limit", "-1")
    assert bad.code == 2 and "--limit -1" in bad.err


def test_show_piped_keeps_paths_whole(cli: Callable[..., Any], two_runs: list[Path]) -> None:
    result = cli("results", "show", "run-aaaa")
    assert result.code == 0, result.err
    assert str(two_runs[0]) in result.out.splitlines()[1]  # a path is never split, even past 80 columns
    assert "…" not in result.out
    line = next(ln for ln in result.out.splitlines() if ln.startswith("samples_per_second"))
    assert "3,505,912.2" in line and "samples/s" in line
