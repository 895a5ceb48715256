"""cmx-mlperf owns the ``mlperf-inference`` suite and its ``mlperf`` result section: it
registers both through ``cmx_register_suites``, its schema (in the plugin package) checks the
section, a bad section fails naming the plugin, and the core envelope no longer knows it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cmx_core.api import Registry, validate_document
from cmx_core.errors import ResultsError
from cmx_core.testing.registry import load_registry
from cmx_core.testing.results import H100_FACTS, SCHEMA_PATH, example_document, mlperf_part
from cmx_mlperf import plugin


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Registry:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "mlperf")
    loaded = load_registry()
    assert loaded.plugins["mlperf"].error is None, loaded.plugins["mlperf"].error
    return loaded


def _document(tmp_path: Path) -> dict[str, Any]:
    return copy.deepcopy(example_document(tmp_path, part=mlperf_part(), facts=H100_FACTS))


def test_the_plugin_registers_the_suite_with_its_own_section_schema(registry: Registry) -> None:
    suite = registry.suites["mlperf-inference"]
    assert suite.plugin == "mlperf" and suite.section == "mlperf"
    assert suite.required_for == ("valid", "invalid")
    assert suite.schema == json.loads(plugin.SECTION_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(suite.schema)
    assert registry.plugins["mlperf"].provides["suites"] == ["mlperf-inference"]
    assert registry.steps["mlperf.loadgen"].measures is True


def test_the_core_envelope_no_longer_holds_the_mlperf_section() -> None:
    core = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert "mlperf" not in core["properties"] and "mlperf" not in core["$defs"]


def test_an_mlperf_document_is_valid_with_the_plugins_suite(registry: Registry, tmp_path: Path) -> None:
    document = _document(tmp_path)
    validate_document(document, source="result.json", suites=registry.suites)
    jsonschema.Draft202012Validator(registry.suites["mlperf-inference"].schema).validate(document["mlperf"])


BAD = [
    ("min_duration_met", "yes", "$.mlperf.min_duration_met must be boolean or null"),
    ("effective", {"min_duration_ms": -1}, "$.mlperf.effective.min_duration_ms must be bigger than or equal to 0"),
    ("latency_ns", {"p99": "fast"}, "$.mlperf.latency_ns.p99 must be number or null"),
    ("submission_blockers", [1], "$.mlperf.submission_blockers[0] must be string"),
    ("accuracy", {"top1": "high"}, "$.mlperf.accuracy.top1 must be number or null"),
]


@pytest.mark.parametrize(("key", "value", "where"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_mlperf_section_fails_naming_the_suite_and_the_plugin(
    registry: Registry, tmp_path: Path, key: str, value: Any, where: str
) -> None:
    document = _document(tmp_path)
    document["mlperf"][key] = value
    with pytest.raises(ResultsError) as caught:
        validate_document(document, source="result.json", suites=registry.suites)
    assert str(caught.value) == (f"result.json: invalid result document: {where} "
                                 "(section of suite 'mlperf-inference' from plugin mlperf)")
    assert not jsonschema.Draft202012Validator(registry.suites["mlperf-inference"].schema).is_valid(document["mlperf"])


def test_a_valid_or_invalid_run_carries_the_section(registry: Registry, tmp_path: Path) -> None:
    document = _document(tmp_path)
    del document["mlperf"]
    with pytest.raises(ResultsError, match=r"\$ must contain \['mlperf'\] \(a 'mlperf-inference' result with "
                       r"status 'valid' carries the suite's section; suite from plugin mlperf\)"):
        validate_document(document, source="result.json", suites=registry.suites)
    document["status"] = "error"
    document["error"] = {"message": "LoadGen crashed", "node": None, "step": None}
    validate_document(document, source="result.json", suites=registry.suites)


def test_without_the_plugin_an_mlperf_result_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    with pytest.raises(ResultsError, match=r"\$\.benchmark\.suite 'mlperf-inference' is a suite no loaded plugin "
                       r"provides; plugin cmx-mlperf provides it: cmx plugins install cmx-mlperf$"):
        validate_document(_document(tmp_path), source="result.json", suites=load_registry().suites)
