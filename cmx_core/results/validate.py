"""Validation of result documents: the envelope, then each suite's section.

The envelope is ``schemas/result.schema.json``; each suite a plugin registers brings the
JSON Schema of its own section (see :mod:`cmx_core.results.suites`). Both are checked by
validators compiled on first use and cached (:mod:`cmx_core.results.compiled`), so
validating costs well under a millisecond and never imports ``jsonschema``. Three rules
JSON Schema cannot say are checked by hand afterwards.

``suites`` (name -> :class:`~cmx_core.providers.types.Suite`, e.g. ``registry.suites``) makes the
check complete: ``benchmark.suite`` must be a loaded suite (else the message names the
plugin that would provide it), every section must belong to a loaded suite and match its
schema, and a suite's section must be present for the statuses it says. Without ``suites``
only the envelope is checked: a key outside the envelope must look like a section (a
lower-case identifier holding an object) but its contents are not looked at. Readers of
stored results use that, so results of a suite whose plugin was uninstalled stay readable.
"""

from __future__ import annotations

import hashlib
import json

from cmx_core.errors import ResultsError
from cmx_core.results import SCHEMA_VERSION  # re-exported
from cmx_core.results.compiled import SchemaViolation, validator
from cmx_core.results.envelope import ENVELOPE_KEYS, SECTION_PATTERN, schema_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cmx_core.providers.types import Suite
    from cmx_core.results.compiled import Validator

__all__ = ["SCHEMA_VERSION", "validate_document"]

_ENVELOPE: list[Validator] = []


def validate_document(
    document: Any, source: str = "result document", suites: Mapping[str, Suite] | None = None
) -> None:
    """Raise :class:`ResultsError` naming the JSON path when ``document`` is not valid.

    ``source`` names the document in the message (a file path, or a run id); ``suites``
    are the loaded suites (see the module docstring for what ``None`` checks).
    """
    sections = _sections(document)
    envelope = {k: v for k, v in document.items() if k not in sections} if sections else document
    try:
        _envelope_validator()(envelope)
    except SchemaViolation as exc:
        raise ResultsError(f"{source}: invalid result document: {_json_path(exc, '$')}") from None
    _check_rules(document, source)
    if suites is None:
        _check_section_shapes(sections, source)
    else:
        _check_suite(document, sections, suites, source)


def _sections(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        return {}
    return {k: v for k, v in document.items() if k not in ENVELOPE_KEYS}


def envelope_schema() -> dict[str, Any]:
    """The envelope schema (``schemas/result.schema.json``) as data."""
    with open(schema_file(), encoding="utf-8") as handle:
        schema: dict[str, Any] = json.load(handle)
    return schema


def _envelope_validator() -> Validator:
    if not _ENVELOPE:
        with open(schema_file(), "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        _ENVELOPE.append(validator(digest=f"envelope:{digest}", load=envelope_schema))
    return _ENVELOPE[0]


def _json_path(exc: Any, root: str) -> str:
    """``data.metrics.x must be object`` -> ``$.metrics.x must be object`` (``root`` = ``$``)."""
    message = str(exc.message)
    if message.startswith("data"):
        message = root + message[len("data"):]
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


def _check_section_shapes(sections: Mapping[str, Any], source: str) -> None:
    for key, value in sections.items():
        if not SECTION_PATTERN.match(key):
            raise ResultsError(
                f"{source}: invalid result document: $ must not contain {{{key!r}}} properties "
                "(neither an envelope key nor a suite section name)"
            )
        if not isinstance(value, dict):
            raise ResultsError(f"{source}: invalid result document: $.{key} must be object (a suite section)")


def _check_suite(
    document: Mapping[str, Any], sections: Mapping[str, Any], suites: Mapping[str, Suite], source: str
) -> None:
    name = document["benchmark"]["suite"]
    suite = suites.get(name)
    if suite is None:
        raise ResultsError(f"{source}: invalid result document: {_unknown_suite(name, suites)}")
    owners = {s.section: s for s in suites.values() if s.section}
    for key, value in sections.items():
        owner = owners.get(key)
        if owner is None:
            known = ", ".join(sorted(owners)) or "none"
            raise ResultsError(
                f"{source}: invalid result document: $ must not contain {{{key!r}}} properties "
                f"(no loaded suite owns a section '{key}'; sections of the loaded suites: {known})"
            )
        _check_section(owner, key, value, source)
    status = document["status"]
    if suite.section and status in suite.required_for and suite.section not in sections:
        raise ResultsError(
            f"{source}: invalid result document: $ must contain [{suite.section!r}] "
            f"(a '{name}' result with status '{status}' carries the suite's section; "
            f"suite from plugin {suite.plugin or '?'})"
        )


def _check_section(suite: Suite, key: str, value: Any, source: str) -> None:
    from cmx_core.results.suites import section_digest  # deferred: start-up: 40 modules not needed to start cmx

    try:
        validator(suite.schema, digest=section_digest(suite))(value)
    except SchemaViolation as exc:
        raise ResultsError(
            f"{source}: invalid result document: {_json_path(exc, '$.' + key)} "
            f"(section of suite '{suite.name}' from plugin {suite.plugin or '?'})"
        ) from None


def _unknown_suite(name: str, suites: Mapping[str, Suite]) -> str:
    """``$.benchmark.suite 'helm' ...; plugin cmx-helm provides it: cmx plugins install ...``
    (the hint comes with the suites, when a registry handed them in as a ProviderTable)."""
    # deferred: an error path only, and the warm replay validates results without typing
    from cmx_core.providers.table import ProviderTable

    hint = suites.missing_hint(name) if isinstance(suites, ProviderTable) else ""
    return (f"$.benchmark.suite {name!r} is a suite no loaded plugin provides"
            + (f"; {hint}" if hint else "; no plugin in registry.yaml claims it"))
