"""The rows of ``cmx results list``: the index's columns plus each run's variant and the
inputs it was given (read from its ``result.json``: the index does not hold them). The
inputs come last: in the plain layout a long value then pads no other column. A run planned
with ``--facts FILE`` (``provenance.facts_file``: a remote executor's nodes, not detected
here) is marked in its status cell, ``FACTS_MARK``."""

from __future__ import annotations

import json

from cmx_core.cli.listing import Listing
from cmx_core.results.numbers import fmt_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cmx_core.results.records import RunSummary

SHORT_ID = 12
"""Characters of a run id in the table and plain layouts (any unique prefix is accepted)."""
COLUMNS = ("run", "created (UTC)", "status", "recipe", "variant", "task", "result", "wall s", "inputs")
UNREADABLE = "(result.json unreadable)"
FACTS_MARK = " (--facts)"
LOW_VALUE = ("task", "variant", "created (UTC)", "inputs")
"""The columns a narrow terminal hides first (``--wide`` shows them); the footer names them."""


def listing(runs: list[RunSummary], full_ids: bool = False) -> Listing:
    rows = tuple(_row(r, full_ids) for r in runs)
    return Listing("runs (newest first)", COLUMNS, rows, frozenset({"result", "wall s"}),
                   whole=frozenset({"run", "created (UTC)", "status"}), drop=LOW_VALUE)


def row_json(run: RunSummary) -> dict[str, Any]:
    """The index row plus ``variant`` and ``inputs`` (None when result.json is unreadable)."""
    query = _query(run)
    data = run.to_json()
    data["variant"] = None if query is None else _variant(query)
    data["inputs"] = None if query is None else query.get("inputs", {})
    data["facts_file"] = None if query is None else query.get("facts_file")
    return data


def _row(run: RunSummary, full_ids: bool) -> tuple[str, ...]:
    query = _query(run)
    variant = UNREADABLE if query is None else _variant(query) or "-"
    inputs = UNREADABLE if query is None else _inputs(query.get("inputs") or {}) or "-"
    result = f"{fmt_number(run.result)} {run.units}" if run.units else "-"
    status = run.status + (FACTS_MARK if query and query.get("facts_file") else "")
    return (run.run_id if full_ids else run.run_id[:SHORT_ID], run.created_at[:19].replace("T", " "),
            status, run.recipe, variant, run.task, result, fmt_number(run.wall_s), inputs)


def _query(run: RunSummary) -> dict[str, Any] | None:
    """The run's query (tags, inputs, variations) and its benchmark variant."""
    try:
        doc = json.loads(run.result_path.read_text(encoding="utf-8"))
        query = dict(doc["provenance"]["query"])
        query["variant"] = (doc.get("benchmark") or {}).get("variant")
        query["facts_file"] = doc["provenance"].get("facts_file")
        return query
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _variant(query: dict[str, Any]) -> str:
    if query.get("variant"):
        return str(query["variant"])
    chosen = query.get("variations") or {}
    return ",".join(name if value is True else f"{name}.{value}" for name, value in chosen.items())


def _inputs(inputs: dict[str, Any]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(inputs.items()))
