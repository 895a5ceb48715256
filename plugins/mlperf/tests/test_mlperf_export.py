"""The mlperf-submission and summary-csv exporters over real runs made through the engine
(a no-op SUT recipe, so no torch), checked file by file against workloads.md §1.9."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import ResultsError, UsageError
from cmx_mlperf.export import submission, summary_csv
from cmx_mlperf.export.systems import REQUIRED_FIELDS

RECIPE = """\
name: test-mlperf-noop
tags: [test, mlperf, noop]
summary: no-op SUT through LoadGen for exporter tests
inputs:
  mode: {type: choice, choices: [PerformanceOnly, AccuracyOnly], default: PerformanceOnly}
steps:
  - uses: mlperf.loadgen
    with:
      sut: noop
      sut_params: {total_sample_count: 3000, performance_sample_count: 1024}
      scenario: Offline
      mode: "{{ inputs.mode }}"
      model_name: resnet50
      duration_s: 0.3
cache: false
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """One PerformanceOnly and one AccuracyOnly run, recorded by the engine."""
    import os

    from cmx_core import api

    home = tmp_path_factory.mktemp("home")
    recipes = tmp_path_factory.mktemp("recipes")
    (recipes / "noop.yaml").write_text(RECIPE)
    saved = {k: os.environ.get(k) for k in ("CMX_HOME", "CMX_CACHE_DIR", "CMX_DATA_DIR")}
    os.environ["CMX_HOME"] = str(home)
    os.environ.pop("CMX_CACHE_DIR", None)
    os.environ.pop("CMX_DATA_DIR", None)
    try:
        yield [api.run("test,mlperf,noop", {"mode": mode}, recipes_dirs=[recipes])
               for mode in ("PerformanceOnly", "AccuracyOnly")]
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _docs(runs: list[Any]) -> tuple[list[dict], list[Path]]:
    return [r.document for r in runs], [r.run_dir for r in runs]


def _root(dest: Path, runs: list[Any]) -> Path:
    return dest / "closed" / "cmx"


def test_submission_tree_layout(runs: list[Any], tmp_path: Path) -> None:
    submission.export(*_docs(runs), tmp_path)
    root = _root(tmp_path, runs)
    (system_file,) = (root / "systems").iterdir()
    scenario_dir = root / "results" / system_file.stem / "resnet" / "Offline"
    expected = {
        "performance/run_1/mlperf_log_summary.txt", "performance/run_1/mlperf_log_detail.txt",
        "accuracy/accuracy.txt", "accuracy/mlperf_log_accuracy.json",
        "accuracy/mlperf_log_detail.txt", "accuracy/mlperf_log_summary.txt",
        "measurements.json", "user.conf", "README.md",
    }
    found = {p.relative_to(scenario_dir).as_posix() for p in scenario_dir.rglob("*") if p.is_file()}
    assert found == expected
    assert (root / "src" / "README.md").is_file()


def test_accuracy_log_truncated_and_hashed(runs: list[Any], tmp_path: Path) -> None:
    submission.export(*_docs(runs), tmp_path)
    (accuracy_dir,) = _root(tmp_path, runs).glob("results/*/resnet/Offline/accuracy")
    full = runs[1].run_dir / runs[1].document["mlperf"]["log_dir"] / "mlperf_log_accuracy.json"
    assert full.stat().st_size > 10 * 1024  # 3000 entries: truncation is exercised
    truncated = (accuracy_dir / "mlperf_log_accuracy.json").read_bytes()
    assert len(truncated) <= 10 * 1024
    assert truncated == full.read_bytes()[:4096] + b"\n\n...\n\n" + full.read_bytes()[-4096:]
    lines = (accuracy_dir / "accuracy.txt").read_text().splitlines()
    assert lines[-1] == f"hash={hashlib.sha256(full.read_bytes()).hexdigest()}"


def test_system_json_has_every_required_field(runs: list[Any], tmp_path: Path) -> None:
    submission.export(*_docs(runs), tmp_path)
    (system_file,) = (_root(tmp_path, runs) / "systems").iterdir()
    record = json.loads(system_file.read_text())
    assert tuple(record) == REQUIRED_FIELDS and len(REQUIRED_FIELDS) == 35
    assert all(value not in ("", None) for value in record.values())
    system = runs[0].document["system"]
    assert record["host_processor_core_count"] == (system["cpu"]["core_count"] or "not detected")
    assert record["host_processor_model_name"] == (system["cpu"]["model"] or "not detected")
    assert record["number_of_nodes"] == 1 and record["division"] == "closed"
    assert record["accelerators_per_node"] == 0 and record["accelerator_model_name"] == "N/A"
    assert "mlcommons-loadgen 6.0.17" in record["other_software_stack"]


def test_measurements_and_user_conf(runs: list[Any], tmp_path: Path) -> None:
    submission.export(*_docs(runs), tmp_path)
    (scenario_dir,) = _root(tmp_path, runs).glob("results/*/resnet/Offline")
    measurements = json.loads((scenario_dir / "measurements.json").read_text())
    for key in ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                "weight_transformations"):
        assert measurements[key]
    assert "resnet50.Offline.min_duration = 300" in (scenario_dir / "user.conf").read_text()
    readme = (scenario_dir / "README.md").read_text()
    assert "not submittable: min_duration 300 ms is below the 600000 ms" in readme


def test_summary_csv_columns_and_row(runs: list[Any], tmp_path: Path) -> None:
    summary_csv.export(*_docs(runs), tmp_path)
    with open(tmp_path / "summary.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == summary_csv.COLUMNS
    (row,) = rows
    perf = runs[0].document
    assert row["Scenario"] == "Offline" and row["MlperfModel"] == "resnet"
    assert row["Units"] == "Samples/s"
    assert float(row["Result"]) == pytest.approx(perf["metrics"]["samples_per_second"]["value"])
    assert row["Accuracy"].startswith("{'samples': 3000")
    assert row["Division"] == "unofficial" and row["PrivateID"] == perf["run_id"]
    assert int(row["errors"]) == len(perf["mlperf"]["submission_blockers"]) > 0


def test_cli_export_uses_the_registered_formats(runs: list[Any], tmp_path: Path) -> None:
    env_home = runs[0].run_dir.parents[2]  # <home>/data/runs/<run>
    cmx = Path(sys.executable).with_name("cmx")
    out = tmp_path / "summary.csv"
    proc = subprocess.run([str(cmx), "results", "export", "--format", "summary-csv", str(out),
                           runs[0].run_id, runs[1].run_id],
                          env={"CMX_HOME": str(env_home), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().splitlines()[0].startswith("Organization,Availability,Division")


def test_refuses_non_mlperf_documents(runs: list[Any], tmp_path: Path) -> None:
    doc = dict(runs[0].document, benchmark={**runs[0].document["benchmark"], "suite": "custom"})
    with pytest.raises(UsageError, match="not an MLPerf Inference result"):
        submission.export([doc], [runs[0].run_dir], tmp_path)


def test_missing_logs_and_non_empty_destination(runs: list[Any], tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(runs[0].run_dir, copy)
    (copy / runs[0].document["mlperf"]["log_dir"] / "mlperf_log_detail.txt").unlink()
    with pytest.raises(ResultsError, match=r"mlperf_log_detail\.txt is missing"):
        submission.export([runs[0].document], [copy], tmp_path / "out")
    submission.export([runs[0].document], [runs[0].run_dir], tmp_path / "again")
    with pytest.raises(ResultsError, match="already holds a submission"):
        submission.export([runs[0].document], [runs[0].run_dir], tmp_path / "again")
