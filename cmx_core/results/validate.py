"""Validation of result documents against ``schemas/result.schema.json``.

The schema check runs the validator generated ahead of time (``_validator.py``, see
``_codegen.py``), so validating costs well under a millisecond and never imports
``jsonschema``. Two rules JSON Schema cannot say are checked by hand afterwards.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

from cmx_core.errors import ResultsError
from cmx_core.results import SCHEMA_VERSION  # re-exported

__all__ = ["SCHEMA_VERSION", "validate_document"]


def validate_document(document: Any, source: str = "result document") -> None:
    """Raise :class:`ResultsError` naming the JSON path when ``document`` is not valid.

    ``source`` names the document in the message (a file path, or a run id).
    """
    from cmx_core.results import _validator

    try:
        _validator.validate_urn_cmx_schema_result_1_0(document)  # type: ignore[no-untyped-call]
    except _validator.JsonSchemaValueException as exc:
        raise ResultsError(f"{source}: invalid result document: {_json_path(exc)}") from None
    _check_rules(document, source)


def _json_path(exc: Any) -> str:
    """``data.metrics.x must be object`` -> ``$.metrics.x must be object``."""
    message = str(exc.message)
    if message.startswith("data"):
        message = "$" + message[len("data"):]
    return message.replace("\n", " ")


def _check_rules(document: Mapping[str, Any], source: str) -> None:
    metrics = document["metrics"]
    primary = document["benchmark"].get("primary_metric")
    if metrics and primary is None:
        raise ResultsError(
            f"{source}: invalid result document: $.benchmark.primary_metric is missing; "
            f"name one of the metrics {sorted(metrics)}"
        )
    if primary is not None and primary not in metrics:
        raise ResultsError(
            f"{source}: invalid result document: $.benchmark.primary_metric {primary!r} "
            f"is not a key of $.metrics {sorted(metrics)}"
        )
    if document["error"] is not None and document["status"] != "error":
        raise ResultsError(
            f"{source}: invalid result document: $.status is {document['status']!r} "
            "but $.error is set; a run with an error has status 'error'"
        )
