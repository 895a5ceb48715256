"""The result envelope schema: it is valid JSON Schema, and cmx's compiled validator and the
reference ``jsonschema`` library agree on good and bad documents (suite sections: see
tests/test_suite_plugins.py; the compiled validator's cache: tests/test_results_compiled.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cmx_core.errors import ResultsError
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import SCHEMA_PATH, validate_document
from cmx_core.results.envelope import ENVELOPE_KEYS
from cmx_core.results.examples import H100_FACTS, example_document, mlperf_part

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
ENVELOPE = jsonschema.Draft202012Validator(SCHEMA)


class _Reference:
    """jsonschema on the envelope (a document's sections set aside, as cmx does without suites)."""

    @staticmethod
    def _envelope(document: Any) -> Any:
        if not isinstance(document, dict):
            return document
        return {k: v for k, v in document.items() if k in ENVELOPE_KEYS or not isinstance(v, dict)}

    def validate(self, document: Any) -> None:
        ENVELOPE.validate(self._envelope(document))

    def is_valid(self, document: Any) -> bool:
        return bool(ENVELOPE.is_valid(self._envelope(document)))


REFERENCE = _Reference()


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["properties"]["schema_version"] == {"enum": ["1.0"], **{
        k: v for k, v in SCHEMA["properties"]["schema_version"].items() if k != "enum"}}


def test_envelope_keys_are_the_schemas_top_level_properties() -> None:
    assert set(SCHEMA["properties"]) == ENVELOPE_KEYS
    assert SCHEMA["additionalProperties"] is False
    assert "mlperf" not in SCHEMA["properties"] and "mlperf" not in SCHEMA["$defs"]  # cmx-mlperf's


def _good_documents(tmp_path: Path) -> dict[str, dict[str, Any]]:
    return {
        "plain": example_document(tmp_path),
        "mlperf": example_document(tmp_path, part=mlperf_part(), facts=H100_FACTS),
        "error": example_document(tmp_path, error=("step exited with 3", "detect-os", "0")),
        "no-facts": example_document(tmp_path, facts={}),
        "partial": example_document(tmp_path, part=ResultPart(
            status="partial", benchmark={"suite": "flexbench", "task": "llama"},
            metrics={"tokens_per_second": Metric(None, "tokens/s", True)})),
    }


@pytest.mark.parametrize("name", ["plain", "mlperf", "error", "no-facts", "partial"])
def test_good_documents_pass_both_validators(tmp_path: Path, name: str) -> None:
    document = _good_documents(tmp_path)[name]
    validate_document(document)
    REFERENCE.validate(document)
    json.dumps(document, allow_nan=False)


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        doc = doc[key]
    if value is _DELETE:
        del doc[last]
    else:
        doc[last] = value


_DELETE = object()

# (dotted path to change, new value, JSON path the error must name)
BAD = [
    ("schema_version", "2.0", "$.schema_version"),
    ("run_id", "../etc", "$.run_id"),
    ("status", "passed", "$.status"),
    ("created_at", "yesterday", "$.created_at"),
    ("surprise", 1, "$.surprise must be object (a suite section)"),
    ("benchmark.suite", "", "$.benchmark.suite"),
    ("benchmark.suite", "MLPerf Inference", "$.benchmark.suite"),
    ("benchmark.scenaro", "Offline", "$.benchmark must not contain"),
    ("benchmark.mode", "fast mode", "$.benchmark.mode"),
    ("provenance.cached_measurement", {"run_id": "r1"}, "$.provenance.cached_measurement must contain"),
    ("provenance.cached_measurement", {"run_id": "r1", "measured_at": "today", "cache_key": "k"},
     "$.provenance.cached_measurement.measured_at"),
    ("metrics.samples_per_second.unit", "", "$.metrics.samples_per_second.unit"),
    ("metrics.samples_per_second.value", "12", "$.metrics.samples_per_second.value"),
    ("metrics.samples_per_second.higher_is_better", _DELETE, "$.metrics.samples_per_second must contain"),
    ("metrics.bad name", {"value": 1, "unit": "s", "higher_is_better": False}, "$.metrics"),
    ("system.cpu.core_count", -1, "$.system.cpu.core_count"),
    ("system.accelerator.count_per_node", 0, "$.system.accelerator.count_per_node"),
    ("system.memory.capacity_gb", 80, "$.system.memory must not contain"),
    ("software.engine.git_commit", "not-a-sha", "$.software.engine.git_commit"),
    ("timing.wall_s", -0.5, "$.timing.wall_s"),
    ("artifacts", [{"path": "x", "sha256": "00", "size_bytes": 1, "kind": "log"}], "$.artifacts[0].sha256"),
    ("error", {"message": "boom"}, "$.error"),
    ("provenance.plugins", [{"name": "x"}], "$.provenance.plugins[0] must contain"),
    ("provenance.query.tags", "detect,os", "$.provenance.query.tags"),
    ("outputs", [], "$.outputs"),
    ("invalid_reasons", [1], "$.invalid_reasons[0]"),
]


@pytest.mark.parametrize(("path", "value", "where"), BAD, ids=[f"{b[0]}={b[1]!r}"[:40] for b in BAD])
def test_bad_documents_fail_both_validators(tmp_path: Path, path: str, value: Any, where: str) -> None:
    document = copy.deepcopy(example_document(tmp_path, part=mlperf_part(), facts=H100_FACTS))
    _set(document, path, value)
    with pytest.raises(ResultsError) as caught:
        validate_document(document, source="run.json")
    message = str(caught.value)
    assert message.startswith("run.json: invalid result document: ")
    assert where in message
    assert "\n" not in message
    assert not REFERENCE.is_valid(document)


def test_primary_metric_must_name_a_metric(tmp_path: Path) -> None:
    document = example_document(tmp_path, part=mlperf_part())
    document["benchmark"]["primary_metric"] = "qps"
    REFERENCE.validate(document)  # a rule JSON Schema cannot express ...
    with pytest.raises(ResultsError, match=r"\$\.benchmark\.primary_metric 'qps' is not a key of \$\.metrics"):
        validate_document(document)  # ... so cmx checks it by hand


def test_primary_metric_required_when_there_are_metrics(tmp_path: Path) -> None:
    document = example_document(tmp_path, part=mlperf_part())
    document["benchmark"]["primary_metric"] = None
    with pytest.raises(ResultsError, match=r"primary_metric is missing; name one of the metrics"):
        validate_document(document)


def test_error_requires_error_status(tmp_path: Path) -> None:
    document = example_document(tmp_path, error=("boom", None, None))
    document["status"] = "completed"
    with pytest.raises(ResultsError, match=r"\$\.status is 'completed' but \$\.error is set"):
        validate_document(document)


def test_not_an_object_is_rejected() -> None:
    with pytest.raises(ResultsError, match=r"invalid result document: \$ must be object"):
        validate_document([1, 2])


def test_keys_added_within_1_0_are_optional(tmp_path: Path) -> None:
    """Documents written before ``os.pretty_name`` and ``accelerator.interconnect`` existed
    stay valid: additions within a schema version are never required."""
    document = example_document(tmp_path, facts=H100_FACTS)
    del document["system"]["os"]["pretty_name"]
    del document["system"]["accelerator"]["interconnect"]
    validate_document(document)
    REFERENCE.validate(document)
