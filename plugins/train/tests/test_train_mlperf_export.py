"""An MLPerf Training benchmark checked by the official tools, unmodified (#45 item 3).

Five toy time-to-accuracy runs of ``resnet`` (cmx's ResNet-50 on generated 32 px images, one
epoch; a sweep over the seed): MLPerf's compliance checker, as shipped, accepts each log
under training 4.0.0 (the newest ruleset of mlperf-logging that names ``resnet``), and the
result records that verdict with the checker's version, ruleset and command, beside the
reasons the run is unofficial; the same checker refuses a log with one required key
tampered. ``cmx results export --format mlperf-training`` writes the submission tree that
mlperf-logging's package checker passes and its result summarizer scores; a tree of the
wrong number of runs is refused in one line."""

from __future__ import annotations

import csv
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TOY = ("--tags=train,time-to-accuracy,resnet50", "--image_size=32", "--samples=16", "--batch_size=8",
       "--max_epochs=1", "--target_accuracy=0.01")
RULESET = "4.0.0"


def _tool(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"mlperf_logging.{module}", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=cwd)


@pytest.fixture(scope="module")
def five(home: Path) -> list[dict[str, Any]]:
    """The five runs' result documents (one sweep over the seed)."""
    from .conftest import run_cmx

    proc = run_cmx(home, "sweep", *TOY, "--matrix", "seed=0,1,2,3,4", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(Path(p["result_path"]).read_text()) for p in json.loads(proc.stdout)["points"]]


def test_the_unmodified_checker_accepts_the_resnet_log_and_refuses_a_tampered_one(
        five: list[dict[str, Any]], home: Path, tmp_path: Path) -> None:
    for document in five:
        compliance = document["train"]["compliance"]
        assert compliance["accepted"] is True and compliance["message"] == "SUCCESS"
        assert compliance["ruleset"] == f"training {RULESET}" and compliance["mlperf_benchmark"] is True
        assert compliance["checker"] == f"mlperf-logging {importlib.metadata.version('mlperf-logging')}"
        assert compliance["command"] == ("python -m mlperf_logging.compliance_checker --usage training "
                                         f"--ruleset {RULESET} mlperf_log.txt")
        assert compliance["common_rules"] is None and "unofficial" in compliance["note"]
        assert document["benchmark"]["division"] == "unofficial"
        assert "resnet50 trains on generated data, not the reference data set" in \
            document["train"]["unofficial_reasons"]
    run_dir = next(p.parent for p in home.glob("data/sweeps/*/point-0/result.json"))
    log = run_dir / next(a["path"] for a in five[0]["artifacts"] if a["kind"] == "mlperf_log")
    shipped = _tool("compliance_checker", "--usage", "training", "--ruleset", RULESET, str(log), cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stdout[-2000:] + shipped.stderr[-2000:]
    tampered = tmp_path / "tampered.txt"  # the submitter's name emptied
    key = '"key": "submission_org", "value": "cmx"'
    tampered.write_text(log.read_text().replace(key, key.replace('"cmx"', '""')))
    assert tampered.read_text() != log.read_text()
    refused = _tool("compliance_checker", "--usage", "training", "--ruleset", RULESET, str(tampered), cwd=tmp_path)
    assert refused.returncode != 0 and "CHECK for 'submission_org' failed" in refused.stdout + refused.stderr


def test_the_exported_tree_passes_the_package_checker_and_is_summarized(
        five: list[dict[str, Any]], cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    ids = [document["run_id"] for document in five]
    tree = tmp_path / "tree"
    exported = cli("results", "export", "--format", "mlperf-training", str(tree), *ids)
    assert exported.returncode == 0, exported.stderr
    (org,) = list(tree.iterdir())
    (system,) = [p.stem for p in (org / "systems").iterdir()]
    results = sorted(p.name for p in (org / "results" / system / "resnet").iterdir())
    assert results == [f"result_{i}.txt" for i in range(5)]
    checked = _tool("package_checker", str(org), "training", RULESET, cwd=tmp_path)
    assert checked.returncode == 0 and "PACKAGE CHECKER FOUND NO ERRORS, SUCCESS" in checked.stdout + checked.stderr
    table = tmp_path / "summary.csv"
    summarized = _tool("result_summarizer", str(org), "training", RULESET, "--csv", str(table), cwd=tmp_path)
    assert summarized.returncode == 0, summarized.stderr[-2000:]
    rows = [row for row in csv.reader(table.read_text().splitlines()) if row]
    header = next(row for row in rows if "resnet" in row)
    row = next(r for r in rows if system in r)
    assert float(row[header.index("resnet")]) > 0  # minutes from run_start to run_stop, olympic mean of the five


def test_a_tree_of_the_wrong_number_of_runs_is_refused(five: list[dict[str, Any]],
                                                       cli: Callable[..., subprocess.CompletedProcess[str]],
                                                       tmp_path: Path) -> None:
    proc = cli("results", "export", "--format", "mlperf-training", str(tmp_path / "t"),
               *[document["run_id"] for document in five[:4]])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "asks for exactly 5 runs of resnet, got 4" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()
