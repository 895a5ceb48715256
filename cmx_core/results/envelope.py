"""What cmx-core owns of every result document: the envelope's top-level keys and where its
schema lives. Import-light (``os`` and ``re`` only): the warm-run replay validates through it."""

from __future__ import annotations

import os
import re

ENVELOPE_KEYS = frozenset({
    "schema_version", "run_id", "created_at", "status", "invalid_reasons", "benchmark",
    "metrics", "model", "cost", "system", "software", "timing", "artifacts", "outputs",
    "error", "provenance", "notes", "telemetry", "attempts", "faults", "conditions",
})
"""The top-level keys of ``schemas/result.schema.json`` (a test keeps them in step)."""

PART_SECTIONS = frozenset({"model", "cost"})
"""Envelope sections a step's result part fills (``ResultPart.sections``), as suites' own do."""

ENGINE_KEYS = ENVELOPE_KEYS - PART_SECTIONS
"""The keys the engine writes itself from what it knows of the run; every other top-level
key of a result came from the run's result part (a remote executor folds them back so)."""

SECTION_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
"""A suite section's name: a lower-case identifier."""


def schema_file() -> str:
    """The path of ``schemas/result.schema.json`` (a string: no pathlib on the replay path)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas",
                        "result.schema.json")
