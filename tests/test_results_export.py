"""flatten to Open MLPerf dotted names; json and csv exports; plugin exporters."""

from __future__ import annotations

import csv
import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import ResultsError, UsageError
from cmx_core.providers.types import Exporter
from cmx_core.results import ResultStore, flatten, write_result
from cmx_core.results.examples import H100_FACTS, MINIMAL_FACTS, example_document, mlperf_part
from cmx_core.results.export import export_results, formats
from cmx_core.results.records import StoredResult

OPEN_MLPERF_NAMES = [
    "metrics.result", "metrics.result_per_accelerator", "metrics.accuracy", "metrics.units",
    "model.name", "model.mlperf_name", "model.architecture", "model.number_of_parameters",
    "model.weight_data_types", "system.accelerator.vendor", "system.accelerator.name",
    "system.accelerator.count_per_node", "system.accelerator.total_count",
    "system.accelerator.memory_capacity", "system.accelerator.memory_config",
    "system.interconnect.accelerator", "system.cpu.vendor", "system.cpu.model", "system.cpu.core_count",
    "system.cpu.count_per_node", "system.cpu.frequency", "system.cpu.caches", "system.cpu.vcpu_count",
    "system.name", "system.type", "system.cooling", "system.number_of_nodes", "system.memory.capacity",
    "system.memory.configuration", "system.interconnect.accelerator_host", "software.framework",
    "software.version", "software.operating_system", "submission.organization", "submission.division",
    "submission.scenario", "submission.availability", "benchmark.name", "benchmark.version", "datetime",
    "system.price_per_hour", "result.tokens_per_second", "result.cost_per_million_tokens",
    "system.total_accelerators",
]


def _stored(tmp_path: Path, run_id: str, **changes: Any) -> StoredResult:
    run_dir = tmp_path / run_id
    doc = example_document(run_dir, run_id=run_id, **changes)
    return StoredResult(run_id, write_result(run_dir, doc, suites=None), doc)


def test_flatten_mlperf_run_to_open_mlperf_names(tmp_path: Path) -> None:
    row = flatten(example_document(tmp_path, facts=H100_FACTS, part=mlperf_part(8000.0)))
    assert list(row)[: len(OPEN_MLPERF_NAMES)] == OPEN_MLPERF_NAMES
    assert row["metrics.result"] == 8000.0
    assert row["metrics.units"] == "samples/s"
    assert row["metrics.result_per_accelerator"] == 1000.0  # 8 GPUs
    assert row["system.cpu.model"] == "Intel(R) Xeon(R) Platinum 8480C"
    assert row["system.cpu.frequency"] == 2.0  # GHz, as Open MLPerf has it
    assert row["system.cpu.frequency_mhz"] == 2000.0  # and the native value under its own name
    assert row["system.interconnect.accelerator"] == "nvlink"
    assert row["system.accelerator.memory_capacity"] == 79.6  # GiB of 85.5e9 bytes
    assert row["system.memory.capacity"] == pytest.approx(2015.5, abs=0.1)  # GiB
    assert row["system.total_accelerators"] == 8
    assert row["software.framework"] == "pytorch" and row["software.version"] == "2.5.1"
    assert row["software.operating_system"] == "Ubuntu 22.04.4 LTS"
    assert row["submission.division"] == "closed" and row["submission.scenario"] == "Offline"
    assert row["benchmark.name"] == "resnet" and row["benchmark.version"] == "5.0"
    assert row["model.name"] == "resnet50-v1.5"
    assert row["metrics.latency_p99_ns"] == 41_000_000 and row["metrics.latency_p99_ns.unit"] == "ns"
    assert row["mlperf.effective.min_duration_ms"] == 600_000
    assert row["software.packages.torch"] == "2.3.1+cu121"
    assert row["provenance.query.tags"] == '["detect", "os"]'
    assert "artifacts" not in row and not any(k.startswith("provenance.recipes") for k in row)
    assert all(not isinstance(v, (dict, list)) for v in row.values())


def test_flatten_plain_run_keeps_nulls_for_absent_values(tmp_path: Path) -> None:
    row = flatten(example_document(tmp_path, facts=MINIMAL_FACTS))
    assert set(OPEN_MLPERF_NAMES) <= set(row)
    assert row["metrics.result"] is None and row["metrics.units"] is None
    assert row["system.accelerator.name"] is None and row["system.total_accelerators"] == 0
    assert row["benchmark.name"] == "detect-os"
    assert row["software.operating_system"] == "Debian GNU/Linux 12"  # no pretty_name: distro + version
    assert row["status"] == "completed" and row["invalid_reasons"] == ""


def test_json_export_is_one_file_with_the_documents(tmp_path: Path) -> None:
    results = [_stored(tmp_path, "r1"), _stored(tmp_path, "r2", part=mlperf_part())]
    out = tmp_path / "out"
    out.mkdir()
    written = export_results("json", out, results)
    assert written == out / "results.json"
    assert json.loads(written.read_text(encoding="utf-8")) == [r.document for r in results]


def test_csv_export_has_a_row_per_run_with_the_union_of_columns(tmp_path: Path) -> None:
    results = [_stored(tmp_path, "r1"), _stored(tmp_path, "r2", part=mlperf_part(), facts=H100_FACTS)]
    written = export_results("csv", tmp_path / "runs.csv", results)
    with written.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["run_id"] for r in rows] == ["r1", "r2"]
    assert rows[0]["metrics.result"] == "" and rows[1]["metrics.result"] == "1234.5"
    assert rows[1]["metrics.units"] == "samples/s"
    assert rows[0]["mlperf.result_validity"] == "" and rows[1]["mlperf.result_validity"] == "VALID"
    assert rows[1]["mlperf.min_duration_met"] == "true"
    header = next(csv.reader(written.open(encoding="utf-8")))
    assert header[: len(OPEN_MLPERF_NAMES)] == OPEN_MLPERF_NAMES


def test_unknown_format_and_bad_destination(tmp_path: Path) -> None:
    results = [_stored(tmp_path, "r1")]
    with pytest.raises(UsageError, match=r"unknown export format 'xlsx'; known formats: csv, json"):
        export_results("xlsx", tmp_path / "x", results, exporters={})
    with pytest.raises(ResultsError, match=r"its directory .*missing does not exist"):
        export_results("csv", tmp_path / "missing" / "x.csv", results)
    with pytest.raises(UsageError, match=r"export needs at least one run"):
        export_results("csv", tmp_path / "x.csv", [])


def _demo_plugin(calls: list[tuple[list[Mapping[str, Any]], list[Path], Path]]) -> types.ModuleType:
    from cmx_core.plugins.hookspecs import hookimpl

    def export(documents: list[Mapping[str, Any]], run_dirs: list[Path], dest: Path) -> None:
        calls.append((documents, run_dirs, dest))
        dest.mkdir()
        for document in documents:
            (dest / f"{document['run_id']}.txt").write_text(document["status"], encoding="utf-8")

    module = types.ModuleType("cmx_demo_exporter")

    @hookimpl
    def cmx_register_exporters(register: Any) -> None:
        register(Exporter(name="status-txt", summary="one text file per run", export=export))

    module.cmx_register_exporters = cmx_register_exporters  # type: ignore[attr-defined]
    return module


def test_plugin_exporter_from_the_plugin_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_core.plugins.loader import load_registry

    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    calls: list[Any] = []
    registry = load_registry(extra=[("demo", _demo_plugin(calls))])
    assert formats(registry.exporters)["status-txt"] == "one text file per run"
    results = [_stored(tmp_path, "r1"), _stored(tmp_path, "r2", part=mlperf_part())]
    dest = tmp_path / "tree"
    assert export_results("status-txt", dest, results, exporters=registry.exporters) == dest
    [(documents, run_dirs, got_dest)] = calls
    assert [d["run_id"] for d in documents] == ["r1", "r2"]
    assert run_dirs == [tmp_path / "r1", tmp_path / "r2"] and got_dest == dest
    assert (dest / "r2.txt").read_text(encoding="utf-8") == "valid"


def test_builtin_formats_win_over_a_plugin_of_the_same_name(tmp_path: Path) -> None:
    plugin = Exporter(name="csv", summary="a plugin's csv", export=lambda d, r, p: None)
    assert formats({"csv": plugin})["csv"].startswith("One CSV file")
    written = export_results("csv", tmp_path / "a.csv", [_stored(tmp_path, "r1")], exporters={"csv": plugin})
    assert written.read_text(encoding="utf-8").startswith("metrics.result,")


def test_export_through_the_store(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results.sqlite")
    for run_id in ("aa", "bb"):
        result = _stored(tmp_path, run_id)
        store.index(result.document, result.path)
    written = export_results("json", tmp_path / "both.json", [store.get("a"), store.get("b")])
    assert [d["run_id"] for d in json.loads(written.read_text(encoding="utf-8"))] == ["aa", "bb"]
