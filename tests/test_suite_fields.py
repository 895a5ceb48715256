"""Suite-specific fields live in their suite's section: MLPerf's ``mlperf_name`` and
``availability`` are in ``mlperf``, and no result of another suite carries them (or a null
``division``). Older results, with them in ``benchmark``, are still read by every reader."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.cli import results_cmd
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import ResultStore, flatten, validate_document, write_result
from cmx_core.results.examples import MINIMAL_FACTS, example_document, mlperf_part
from cmx_core.results.suite_fields import mlperf_field

MLPERF_ONLY = ("mlperf_name", "availability")


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))
    for name in ("CMX_DATA_DIR", "CMX_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path / "home"


def _older(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as results were written before the move: MLPerf's fields in ``benchmark``."""
    section = {k: v for k, v in doc["mlperf"].items() if k not in MLPERF_ONLY}
    benchmark = {**doc["benchmark"], "mlperf_name": doc["mlperf"]["mlperf_name"], "availability": None}
    return {**doc, "benchmark": benchmark, "mlperf": section}


def _results(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="cmx")
    results_cmd.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.handler(args)
    return code, capsys.readouterr().out


def test_a_plain_run_has_no_mlperf_fields_and_no_null_division(tmp_path: Path) -> None:
    doc = example_document(tmp_path, facts=MINIMAL_FACTS)
    validate_document(doc, source="plain")
    assert not {"division", *MLPERF_ONLY} & set(doc["benchmark"])
    assert {"suite", "task", "scenario", "mode", "primary_metric"} <= set(doc["benchmark"])


def test_a_suite_without_divisions_omits_them_and_one_with_keeps_its_value(tmp_path: Path) -> None:
    part = ResultPart(status="valid", benchmark={"suite": "custom", "task": "t", "division": None},
                      metrics={"x": Metric(1.0, "s", False)})
    assert "division" not in example_document(tmp_path, part=part)["benchmark"]
    kept = ResultPart(status="valid", benchmark={"suite": "custom", "task": "t", "division": "unofficial"},
                      metrics={"x": Metric(1.0, "s", False)})
    assert example_document(tmp_path, part=kept)["benchmark"]["division"] == "unofficial"


def test_mlperf_fields_live_in_the_mlperf_section(tmp_path: Path) -> None:
    doc = example_document(tmp_path, part=mlperf_part())
    validate_document(doc, source="mlperf")
    assert not set(MLPERF_ONLY) & set(doc["benchmark"])
    assert doc["mlperf"]["mlperf_name"] == "resnet" and doc["mlperf"]["availability"] == "available"
    row = flatten(doc)
    assert row["benchmark.name"] == "resnet" and row["submission.availability"] == "available"
    assert row["submission.division"] == "closed"


def test_an_older_result_with_them_at_the_top_level_is_still_read(tmp_path: Path) -> None:
    old = _older(example_document(tmp_path, part=mlperf_part()))
    validate_document(old, source="old")  # the schema still accepts them in `benchmark`
    assert mlperf_field(old, "mlperf_name") == "resnet" and mlperf_field(old, "availability") is None
    row = flatten(old)
    assert row["benchmark.name"] == "resnet" and row["model.mlperf_name"] == "resnet"
    assert row["submission.availability"] is None


def test_results_list_show_and_compare_read_old_and_new_results(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = ResultStore(paths.results_db())
    for run_id, older in (("run-new", False), ("run-old", True)):
        run_dir = paths.runs_dir() / run_id
        doc = example_document(run_dir, run_id=run_id, part=mlperf_part())
        doc = _older(doc) if older else doc
        store.index(doc, write_result(run_dir, doc, suites=None))
    code, out = _results(["results", "list", "--json"], capsys)
    assert code == 0 and {r["run_id"] for r in json.loads(out)["runs"]} == {"run-new", "run-old"}
    for run_id in ("run-new", "run-old"):
        code, out = _results(["results", "show", run_id, "--json"], capsys)
        shown = json.loads(out)
        assert code == 0 and mlperf_field(shown, "mlperf_name") == "resnet"
    code, out = _results(["results", "compare", "run-new", "run-old", "--json"], capsys)
    assert code == 0 and json.loads(out)
