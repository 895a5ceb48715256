"""The mlperf-submission and summary-csv exporters over real runs made through the engine
(a no-op SUT recipe, so no torch), checked file by file against workloads.md §1.9."""

from __future__ import annotations

import csv
import hashlib
import json
import re
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
  scenario: {type: choice, choices: [Offline, Server, SingleStream], default: Offline}
  model_name: {default: resnet50}
  tokens: {type: integer, default: 0}
  system_type: {type: choice, choices: [auto, datacenter, edge], default: auto}
steps:
  - uses: mlperf.loadgen
    with:
      sut: noop
      sut_params: {total_sample_count: 3000, performance_sample_count: 1024, tokens_per_sample: "{{ inputs.tokens }}"}
      scenario: "{{ inputs.scenario }}"
      mode: "{{ inputs.mode }}"
      model_name: "{{ inputs.model_name }}"
      duration_s: 0.3
      min_query_count: 1
outputs:
  system_type: {value: "{{ inputs.system_type }}"}
cache: false
"""
#: (mode, scenario, model_name, tokens per sample, system_type) of the recorded runs
RUNS = [("PerformanceOnly", "Offline", "resnet50", 0, "auto"), ("AccuracyOnly", "Offline", "resnet50", 0, "auto"),
        ("PerformanceOnly", "SingleStream", "llama3.1-8b", 4, "auto"),
        ("PerformanceOnly", "Offline", "llama3.1-8b", 4, "datacenter")]


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
        yield [api.run("test,mlperf,noop", {"mode": mode, "scenario": scenario, "model_name": model,
                                            "tokens": tokens, "system_type": kind}, recipes_dirs=[recipes])
               for mode, scenario, model, tokens, kind in RUNS]
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
    assert record["accelerators_per_node"] == "0" and record["accelerator_model_name"] == "N/A"
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
    summary_csv.export(*_docs(runs[:2]), tmp_path)
    with open(tmp_path / "summary.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == summary_csv.COLUMNS
    (row,) = rows
    perf = runs[0].document
    assert row["Scenario"] == "Offline" and row["MlperfModel"] == "resnet"
    assert row["Units"] == "Samples/s"
    assert float(row["Result"]) == pytest.approx(perf["metrics"]["samples_per_second"]["value"])
    assert row["Accuracy"] == ""  # the no-op SUT has no top-1 for the checker to read
    assert row["Division"] == "closed" and row["PrivateID"] == perf["run_id"]
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


# --- The rules of the official v6.1 submission checker (mlcommons/inference,
# tools/submission/submission_checker), restated here from reading it: `checker_errors` walks an
# exported tree and returns one line per rule broken; each test below first shows that cmx's
# export passes a rule, then breaks the tree so that the rule has to fire.

#: System description fields the checker requires, and those that must not be empty/falsy.
REQUIRED_SYSTEM = REQUIRED_FIELDS
MEANINGFUL_SYSTEM = (
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_memory_configuration", "host_storage_capacity", "host_storage_type",
    "host_networking", "host_network_card_count", "host_networking_topology", "accelerators_per_node",
    "accelerator_model_name", "accelerator_memory_capacity", "accelerator_host_interconnect",
    "accelerator_memory_configuration", "accelerator_interconnect", "cooling", "framework",
    "operating_system", "other_software_stack",
)
SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")
#: Required and optional scenarios per benchmark and system type (v6.1), for the benchmarks cmx runs.
CHECKER_SCENARIOS: dict[str, dict[str, tuple[set[str], set[str]]]] = {
    "datacenter": {"llama3.1-8b": ({"Offline"}, {"Interactive", "Server"}), "3d-unet-99": ({"Offline"}, set())},
    "edge": {"resnet": ({"SingleStream", "MultiStream", "Offline"}, set()),
             "llama3.1-8b-edge": ({"SingleStream", "Offline"}, set()),
             "3d-unet-99": ({"SingleStream", "Offline"}, set())},
    "datacenter,edge": {"resnet": ({"SingleStream", "MultiStream", "Offline", "Server"}, set()),
                        "llama3.1-8b": ({"Offline"}, {"Interactive", "Server"}),
                        "llama3.1-8b-edge": ({"SingleStream", "Offline"}, set()),
                        "3d-unet-99": ({"SingleStream", "Offline"}, set())},
}
MEASUREMENT_FIELDS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                      "weight_transformations")
#: How the checker reads each accuracy type from accuracy.txt (our own regexes for its formats).
ACCURACY_READERS = {
    "resnet": [("acc", r"^accuracy=([\d.]+)%")],
    "llama3.1-8b": [(kind, rf".*'{key}':\s+([\d.]+)") for kind, key in (
        ("ROUGE1", "rouge1"), ("ROUGE2", "rouge2"), ("ROUGEL", "rougeL"), ("ROUGELSUM", "rougeLsum"),
        ("GEN_LEN", "gen_len"))],
}
ACCURACY_READERS["llama3.1-8b-edge"] = ACCURACY_READERS["llama3.1-8b"]


def read_accuracy(benchmark: str, accuracy_txt: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in accuracy_txt.read_text().splitlines():
        for kind, pattern in ACCURACY_READERS.get(benchmark, []):
            match = re.match(pattern, line)
            if match:
                found[kind] = match.group(1)
    return found


def checker_errors(tree: Path) -> list[str]:
    """The checker's rules over ``tree`` (the directory holding closed/, open/, network/)."""
    errors: list[str] = []
    for division_dir in sorted(p for p in tree.iterdir() if p.is_dir()):
        division = division_dir.name
        if division not in ("closed", "open", "network"):
            errors.append(f"{division}: not a division")
            continue
        for sub in sorted(p for p in division_dir.iterdir() if p.is_dir()):
            if division != "open" and not ((sub / "calibration.md").is_file()
                                           or (sub / "documentation" / "calibration.md").is_file()):
                errors.append(f"{sub}: has no calibration file")
            if not (sub / "src").is_dir():
                errors.append(f"{sub}: src directory does not exist")
            for system_dir in sorted((sub / "results").iterdir()):
                errors += _system_errors(division, sub, system_dir)
    return errors


def _system_errors(division: str, sub: Path, system_dir: Path) -> list[str]:
    errors: list[str] = []
    path = sub / "systems" / f"{system_dir.name}.json"
    if not path.is_file():
        return [f"{path}: system json file not found"]
    system = json.loads(path.read_text())
    for key in REQUIRED_SYSTEM:
        if key not in system:
            errors.append(f"{path}: field {key} is missing")
        elif key in MEANINGFUL_SYSTEM and not system[key]:
            errors.append(f"{path}: field {key} requires a meaningful response but is empty")
    if str(system.get("status", "")).lower() not in ("available", "preview", "rdi"):
        errors.append(f"{path}: invalid status")
    kind = system.get("system_type")
    if kind not in SYSTEM_TYPES:
        errors.append(f"{path}: invalid system type ({kind})")
        return errors
    is_network = str(system.get("is_network", "false")).lower() == "true"
    if {"closed": False, "network": True}.get(division, is_network) != is_network:
        errors.append(f"{path}: incorrect network mode for division {division}")
    if str(system.get("submitter", "")).lower() != sub.name.lower():
        errors.append(f"{path}: submitter differs from the directory")
    if str(system.get("division", "")).lower() != division:
        errors.append(f"{path}: division differs from the directory")
    table = CHECKER_SCENARIOS["datacenter,edge" if kind == "edge,datacenter" else kind]
    for bench_dir in sorted(system_dir.iterdir()):
        scenarios = {p.name for p in bench_dir.iterdir() if p.is_dir()}
        if division != "open":
            if bench_dir.name not in table:
                errors.append(f"{bench_dir}: benchmark is not a {kind} benchmark (the checker fails)")
            else:
                required, optional = table[bench_dir.name]
                unknown = scenarios - required - optional
                if unknown:
                    errors.append(f"{bench_dir}: has all unknown scenarios for this benchmark {sorted(unknown)}")
        for scenario in sorted(scenarios):
            errors += _scenario_errors(bench_dir / scenario, bench_dir.name)
    return errors


def _scenario_errors(base: Path, benchmark: str) -> list[str]:
    errors = [f"{base}: {name} missing" for name in ("performance/run_1/mlperf_log_summary.txt",
                                                     "performance/run_1/mlperf_log_detail.txt")
              if not (base / name).is_file()]
    measurements = base / "measurements.json"
    if not measurements.is_file():
        errors.append(f"{base}: measurements json file not found")
    else:
        record = json.loads(measurements.read_text())
        errors += [f"{measurements}: field {k} is missing meaningful value" for k in MEASUREMENT_FIELDS
                   if not record.get(k)]
    for name in ("user.conf", "README.md"):
        if not (base / name).is_file() or (base / name).stat().st_size == 0:
            errors.append(f"{base}: is missing {name}")
    accuracy = base / "accuracy"
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "accuracy.txt", "mlperf_log_accuracy.json"):
        if not (accuracy / name).is_file():
            errors.append(f"{accuracy}: {name} is missing")
    log = accuracy / "mlperf_log_accuracy.json"
    if log.is_file() and log.stat().st_size > 10 * 1024:
        errors.append(f"{log}: is not truncated")
    result = accuracy / "accuracy.txt"
    if result.is_file() and not any(re.match(r"^hash=[\w\d]+$", line) for line in result.read_text().splitlines()):
        errors.append(f"{result}: no hash value for accuracy.txt")
    return errors


def _export_all(runs: list[Any], dest: Path) -> Path:
    submission.export(*_docs(runs), dest)
    return dest / "closed" / "cmx"


def _system_file(root: Path) -> Path:
    (path,) = (root / "systems").iterdir()
    return path


def _edit_system(root: Path, **changes: Any) -> None:
    path = _system_file(root)
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _perf_only(runs: list[Any]) -> list[Any]:
    """Runs whose groups have no accuracy run (their accuracy files are reported missing)."""
    return [r for r in runs if r.document["benchmark"]["task"] != "resnet50"]


def test_checker_rules_hold_for_the_export(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    assert checker_errors(tmp_path) == []
    assert (root / "documentation" / "calibration.md").read_text().startswith("# Calibration")


def test_rule_meaningful_fields_cpu_system_has_accelerators_per_node(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    record = json.loads(_system_file(root).read_text())
    assert record["accelerators_per_node"] == "0" and int(record["accelerators_per_node"]) == 0
    _edit_system(root, accelerators_per_node=0)  # what cmx wrote before: falsy for the checker
    assert checker_errors(tmp_path) == [
        f"{_system_file(root)}: field accelerators_per_node requires a meaningful response but is empty"]


def test_rule_required_system_fields(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    record = json.loads(_system_file(root).read_text())
    del record["cooling"]
    _system_file(root).write_text(json.dumps(record))
    assert checker_errors(tmp_path) == [f"{_system_file(root)}: field cooling is missing"]


def test_rule_status_type_division_submitter(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    _edit_system(root, status="released", system_type="workstation")
    errors = checker_errors(tmp_path)
    assert any("invalid status" in e for e in errors) and any("invalid system type" in e for e in errors)
    _edit_system(root, status="rdi", system_type="edge", submitter="other", division="open")
    assert [e.split(": ", 1)[1] for e in checker_errors(tmp_path)] == [
        "submitter differs from the directory", "division differs from the directory"]
    _edit_system(root, submitter="cmx", division="closed", is_network="true")
    assert [e.split(": ", 1)[1] for e in checker_errors(tmp_path)] == ["incorrect network mode for division closed"]


def test_rule_calibration_file_for_closed(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    (root / "documentation" / "calibration.md").unlink()
    assert checker_errors(tmp_path) == [f"{root}: has no calibration file"]


def test_rule_calibration_not_required_in_open(runs: list[Any], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_MLPERF_DIVISION", "open")
    submission.export(*_docs(runs[:2]), tmp_path)
    root = tmp_path / "open" / "cmx"
    assert json.loads(_system_file(root).read_text())["division"] == "open"
    (root / "documentation" / "calibration.md").unlink()
    assert checker_errors(tmp_path) == []


def test_rule_scenarios_filed_under_their_benchmark(runs: list[Any], tmp_path: Path) -> None:
    """SingleStream (auto) goes to the edge llama3.1-8b-edge, the datacenter Offline run to
    llama3.1-8b, resnet Offline (auto) to resnet; the system is then datacenter,edge."""
    root = _export_all(runs, tmp_path)
    (system_dir,) = (root / "results").iterdir()
    found = {f"{b.name}/{s.name}" for b in system_dir.iterdir() for s in b.iterdir()}
    assert found == {"resnet/Offline", "llama3.1-8b-edge/SingleStream", "llama3.1-8b/Offline"}
    assert json.loads(_system_file(root).read_text())["system_type"] == "datacenter,edge"
    scenario_errors = [e for e in checker_errors(tmp_path)
                       if "scenarios for" in e.split(": ", 1)[1] or "benchmark is not" in e.split(": ", 1)[1]]
    assert scenario_errors == []
    # what cmx did before: SingleStream under the datacenter benchmark
    (system_dir / "llama3.1-8b-edge" / "SingleStream").rename(system_dir / "llama3.1-8b" / "SingleStream")
    assert any(e.endswith("has all unknown scenarios for this benchmark ['SingleStream']")
               for e in checker_errors(tmp_path))


def test_rule_edge_only_system(runs: list[Any], tmp_path: Path) -> None:
    submission.export(*_docs([runs[2]]), tmp_path)
    root = tmp_path / "closed" / "cmx"
    assert json.loads(_system_file(root).read_text())["system_type"] == "edge"
    _edit_system(root, system_type="datacenter")  # the old export: the checker has no such benchmark
    assert any("llama3.1-8b-edge: benchmark is not a datacenter benchmark" in e for e in checker_errors(tmp_path))


def test_system_type_input_decides_and_conflicts_are_refused(runs: list[Any]) -> None:
    from cmx_mlperf.export import common

    doc = runs[2].document  # llama SingleStream, system_type auto
    assert common.placement(doc) == ("llama3.1-8b-edge", "edge")
    assert common.placement(runs[3].document) == ("llama3.1-8b", "datacenter")
    edge = dict(runs[3].document, outputs={**runs[3].document["outputs"], "system_type": "edge"})
    assert common.placement(edge) == ("llama3.1-8b-edge", "edge")
    datacenter = dict(doc, outputs={**doc["outputs"], "system_type": "datacenter"})
    with pytest.raises(UsageError, match=r"llama3\.1-8b SingleStream has no place .*--system_type=edge$"):
        common.placement(datacenter)
    edge_model = dict(doc, benchmark={**doc["benchmark"], "scenario": "Offline"},
                      mlperf={**doc["mlperf"], "mlperf_name": "llama3_1-8b-edge"})
    assert common.placement(edge_model) == ("llama3.1-8b-edge", "edge")
    # an older result, with MLPerf's name in `benchmark` and none in its section, reads the same
    older = dict(edge_model, benchmark={**edge_model["benchmark"], "mlperf_name": "llama3_1-8b-edge"},
                 mlperf={k: v for k, v in doc["mlperf"].items() if k != "mlperf_name"})
    assert common.placement(older) == ("llama3.1-8b-edge", "edge")
    with pytest.raises(UsageError, match="is an edge benchmark"):
        common.placement(dict(edge_model, outputs={"system_type": "datacenter"}))
    # CMX_SYSTEM_TYPE (the detected system.type) is the default when the input is auto
    offline = dict(doc, benchmark={**doc["benchmark"], "scenario": "Offline"})
    assert common.placement(offline) == ("llama3.1-8b", "datacenter")
    env_edge = dict(offline, system={**doc["system"], "type": "edge"})
    assert common.placement(env_edge) == ("llama3.1-8b-edge", "edge")
    # resnet is an edge benchmark in v6.1; its Server only a datacenter,edge system may hold
    resnet = runs[0].document
    assert common.placement(resnet) == ("resnet", "edge")
    server = dict(resnet, benchmark={**resnet["benchmark"], "scenario": "Server"})
    assert common.placement(server) == ("resnet", "datacenter,edge")
    with pytest.raises(UsageError, match=r"resnet Server has no place .*--system_type=datacenter$"):
        common.placement(dict(server, outputs={"system_type": "edge"}))
    assert common.combined_system_type(["edge", "datacenter,edge"]) == "datacenter,edge"
    assert common.combined_system_type(["datacenter", "datacenter"]) == "datacenter"


def test_rule_measurements_and_required_files(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    (scenario,) = root.glob("results/*/resnet/Offline")
    path = scenario / "measurements.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "retraining": ""}))
    (scenario / "user.conf").write_text("")
    (scenario / "performance" / "run_1" / "mlperf_log_detail.txt").unlink()
    assert sorted(e.split(": ", 1)[1] for e in checker_errors(tmp_path)) == [
        "field retraining is missing meaningful value", "is missing user.conf",
        "performance/run_1/mlperf_log_detail.txt missing"]


def test_rule_accuracy_files_truncation_and_hash(runs: list[Any], tmp_path: Path) -> None:
    root = _export_all(runs[:2], tmp_path)
    (accuracy,) = root.glob("results/*/resnet/Offline/accuracy")
    full = runs[1].run_dir / runs[1].document["mlperf"]["log_dir"] / "mlperf_log_accuracy.json"
    shutil.copyfile(full, accuracy / "mlperf_log_accuracy.json")  # untruncated
    (accuracy / "accuracy.txt").write_text("accuracy=1.000%, good=1, total=100\n")
    assert sorted(e.split(": ", 1)[1] for e in checker_errors(tmp_path)) == [
        "is not truncated", "no hash value for accuracy.txt"]
    perf_only = tmp_path / "perf"
    submission.export(*_docs([runs[2]]), perf_only)
    assert sum("accuracy.txt is missing" in e for e in checker_errors(perf_only)) == 1


ACCURACY_DOCS = [
    ("resnet", {"top1": 0.76012, "samples": 50000}, "acc: 76.012"),
    ("llama3.1-8b", {"rouge1": 38.77921, "rouge2": 15.90754, "rougeL": 24.4957, "rougeLsum": 35.793,
                     "gen_len": 8167644.0, "gen_num": 13368, "tokens_per_sample": 611.0},
     "ROUGE1: 38.7792  ROUGE2: 15.9075  ROUGEL: 24.4957  ROUGELSUM: 35.793  GEN_LEN: 8167644"),
    ("llama3.1-8b-edge", {"rouge1": 100.0, "rouge2": 2.5e-5, "rougeL": 1.0, "rougeLsum": 1.0, "gen_len": 1.25e7},
     "ROUGE1: 100  ROUGE2: 0.0  ROUGEL: 1  ROUGELSUM: 1  GEN_LEN: 12500000"),
]


@pytest.mark.parametrize(("benchmark", "accuracy", "column"), ACCURACY_DOCS)
def test_rule_accuracy_column_is_what_the_checker_reads(benchmark: str, accuracy: dict[str, Any], column: str,
                                                       tmp_path: Path) -> None:
    """The checker reads each accuracy type from accuracy.txt and writes the dict of the
    strings it read as JSON with commas made spaces, quotes and braces dropped."""
    from cmx_mlperf.export import common

    doc = {"mlperf": {"accuracy": accuracy}}
    (tmp_path / "accuracy.txt").write_text(common.accuracy_text(doc) + "\nhash=00\n")
    read = read_accuracy(benchmark, tmp_path / "accuracy.txt")
    assert list(read) == [kind for kind, _ in ACCURACY_READERS[benchmark]]
    checker_column = json.dumps(read).replace(",", " ").replace('"', "").replace("{", "").replace("}", "").strip()
    assert common.accuracy_column(doc, benchmark) == checker_column == column


def test_rule_summary_csv_division_location_and_system_columns(runs: list[Any], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_MLPERF_DIVISION", "open")
    summary_csv.export(*_docs(runs), tmp_path)
    submission.export(*_docs(runs), tmp_path / "tree")
    record = json.loads(_system_file(tmp_path / "tree" / "open" / "cmx").read_text())
    with open(tmp_path / "summary.csv", newline="") as handle:
        rows = {(r["MlperfModel"], r["Scenario"]): r for r in csv.DictReader(handle)}
    assert set(rows) == {("resnet", "Offline"), ("llama3.1-8b-edge", "SingleStream"), ("llama3.1-8b", "Offline")}
    for (bench, scenario), row in rows.items():
        assert row["Division"] == row["compliance"] == "open"
        assert row["SystemType"] == record["system_type"] == "datacenter,edge"
        assert row["total_accelerators"] == str(int(record["number_of_nodes"]) * int(record["accelerators_per_node"]))
        assert row["accelerators_per_node"] == "0"
        location = tmp_path / "tree" / row["Location"]
        assert row["Location"].startswith("open/cmx/results/") and location.name == "run_1"
        assert location.parent.parent.name == scenario and location.parent.parent.parent.name == bench
        assert (location / "mlperf_log_detail.txt").is_file()


def test_measurements_say_what_the_run_recorded_and_never_guess() -> None:
    """The HTTP path once exported `starting_weights_filename: openai-http` and `fp32`:
    the weights are the served directory with its digest and data type, or 'not recorded'."""
    from cmx_mlperf.export.submission import NOT_RECORDED, measurements

    served = {"run_id": "r1", "benchmark": {"task": "openai-http"},
              "model": {"name": "llama", "source": "/models/llama", "sha256": "ab" * 32,
                        "weight_data_types": "bf16"}}
    written = measurements(served)
    assert written["starting_weights_filename"] == "/models/llama"
    assert written["weight_data_types"] == written["input_data_types"] == "bf16"
    assert written["starting_weights_sha256"] == "ab" * 32
    unknown = measurements({"run_id": "r2", "benchmark": {"task": "openai-http"},
                            "model": {"name": "llama", "source": None, "served_name": "meta/llama",
                                      "weight_data_types": None}})
    assert unknown["starting_weights_filename"] == "meta/llama"
    assert unknown["weight_data_types"] == NOT_RECORDED and "openai-http" not in json.dumps(unknown)


def test_the_framework_of_an_http_run_is_the_serving_engine() -> None:
    from cmx_mlperf.export.systems import framework

    software = {"framework": "pytorch", "framework_version": "2.13.0",
                "packages": {"torch": "2.7.1", "torch-cuda": "12.8", "vllm": "0.10.1.1"}}
    assert framework(software, {"engine": "vllm", "version": "0.10.1.1"}) == "vLLM 0.10.1.1 (PyTorch 2.7.1, CUDA 12.8)"
    assert framework(software) == "PyTorch 2.13.0"  # an in-process SUT: its own framework
    assert framework({}, None) == "Python (no ML framework)"
