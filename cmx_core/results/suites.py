"""Suites and their result sections: the checks a suite passes when a plugin registers it.

A suite (``benchmark.suite``) owns at most one top-level section of the result document;
the section's JSON Schema comes with the suite. The envelope (every key below) belongs to
cmx-core, so no suite may claim one of its keys.
"""

from __future__ import annotations

from cmx_core.errors import PluginError
from cmx_core.providers.types import Suite
from cmx_core.results import compiled
from cmx_core.results.compiled import schema_digest
from cmx_core.results.envelope import ENVELOPE_KEYS, SECTION_PATTERN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["CORE_SUITES", "CUSTOM", "ENVELOPE_KEYS", "SECTION_PATTERN", "check_suite", "section_digest"]

STATUSES = ("valid", "invalid", "error", "partial", "completed")

CUSTOM = Suite(
    name="custom",
    summary="Plain recipes: metrics and outputs only, no section of their own",
    section="",
    schema={},
    required_for=(),
    plugin="cmx-core",
)
"""The built-in suite of every result whose step names no other suite."""

CORE_SUITES = (CUSTOM,)

_DIGESTS: dict[int, tuple[Mapping[str, Any], str]] = {}


def check_suite(suite: Any, owner: str) -> None:
    """Refuse a suite that cannot be composed into the result validator.

    ``owner`` names the registering plugin in the one-line :class:`PluginError`. A section
    schema already compiled in the cmx cache was checked before; otherwise it is checked
    against its metaschema (this imports ``jsonschema``, once per new schema) and compiled.
    """
    if not isinstance(suite, Suite):
        raise PluginError(f"{owner}: cmx_register_suites registered a {type(suite).__name__}, not a Suite")
    where = f"{owner}: suite '{suite.name}'"
    if not isinstance(suite.name, str) or not suite.name.strip():
        raise PluginError(f"{owner}: a suite has an empty name")
    bad_status = sorted(set(suite.required_for) - set(STATUSES))
    if bad_status:
        raise PluginError(f"{where} required_for names unknown status {bad_status[0]!r}; use {', '.join(STATUSES)}")
    if not suite.section:
        return
    if not SECTION_PATTERN.match(suite.section):
        raise PluginError(f"{where} section {suite.section!r} is not a lower-case identifier (a-z, 0-9, _)")
    if suite.section in ENVELOPE_KEYS:
        raise PluginError(f"{where} section {suite.section!r} is a key of the result envelope; pick another name")
    _check_schema(suite, where)


def section_digest(suite: Suite) -> str:
    """The digest of a suite's section schema (memoised: the schema must not be mutated)."""
    held = _DIGESTS.get(id(suite.schema))
    if held is not None and held[0] is suite.schema:
        return held[1]

    digest = schema_digest(suite.schema)
    _DIGESTS[id(suite.schema)] = (suite.schema, digest)
    return digest


def _check_schema(suite: Suite, where: str) -> None:
    if not isinstance(suite.schema, dict):
        raise PluginError(f"{where} section schema is a {type(suite.schema).__name__}, not a JSON object")
    try:
        digest = section_digest(suite)
    except (TypeError, ValueError) as exc:
        raise PluginError(f"{where} section schema is not JSON data: {exc}") from None
    if compiled.is_cached(digest):
        return
    problem = metaschema_problem(suite.schema)
    if problem:
        raise PluginError(f"{where} section schema is invalid: {problem}")
    compiled.validator(suite.schema, digest=digest)  # compile now: the next run only loads it


def metaschema_problem(schema: Mapping[str, Any]) -> str:
    """Why ``schema`` is not valid under its metaschema (2020-12 unless ``$schema`` says), or ""."""
    import jsonschema  # deferred: jsonschema only when this runs (87 modules)

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    except Exception as exc:  # noqa: BLE001 - an unknown $schema
        return f"unknown $schema ({exc})"
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is None:
        return _unresolvable_ref(schema)
    return f"{error.message} at {json_path(error.absolute_path)}"


def _unresolvable_ref(schema: Mapping[str, Any]) -> str:
    """A local ``$ref`` that points nowhere, which the metaschema cannot catch."""
    for where, ref in _refs(schema, "$"):
        if not ref.startswith("#"):
            return f"$ref {ref!r} at {where} is not local; a section schema must be self-contained"
        node: Any = schema
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return f"$ref {ref!r} at {where} does not resolve"
            node = node[part]
    return ""


def _refs(node: Any, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.append((where, value))
            else:
                found.extend(_refs(value, f"{where}.{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_refs(value, f"{where}[{index}]"))
    return found


def json_path(parts: Any) -> str:
    """``['properties', 'a', 0]`` -> ``$.properties.a[0]``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
