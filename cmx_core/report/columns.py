"""The columns of a comparison: ``RUN`` or ``RUN,RUN,...`` (repeats of one run), and with
``with_repeats`` every stored run sharing a column's lock digest and hardware class."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.results.hardware import of_document

_SCAN_LIMIT = 100_000


def column_documents(store: Any, specs: Sequence[str], *, with_repeats: bool = False) -> list[list[dict[str, Any]]]:
    """Documents per column, in the order given; a run named twice is a UsageError."""
    columns = [[store.get(run).document for run in _split(spec)] for spec in specs]
    named = [d["run_id"] for column in columns for d in column]
    twice = sorted({r for r in named if named.count(r) > 1})
    if twice:
        raise UsageError(f"cmx results compare: run {twice[0]} is named twice; name each run once")
    if with_repeats:
        taken = set(named)
        for column in columns:
            extra = repeats_of(store, column[0], exclude=taken)
            taken.update(d["run_id"] for d in extra)
            column.extend(extra)
    return columns


def repeats_of(store: Any, document: Mapping[str, Any], exclude: set[str]) -> list[dict[str, Any]]:
    """Stored runs of the same lock (digest) on the same hardware class, oldest first."""
    digest = document["provenance"].get("lock_digest")
    if not digest:
        return []
    hardware = of_document(document).id
    found = []
    for summary in reversed(store.list(limit=_SCAN_LIMIT, recipe=document["software"]["recipe"]["name"])):
        if summary.run_id in exclude:
            continue
        other = store.get(summary.run_id).document
        if other["provenance"].get("lock_digest") == digest and of_document(other).id == hardware:
            found.append(other)
    return found


def group_by_lock(documents: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Documents grouped by (lock digest, hardware class), groups in order of first appearance
    (a document without a lock digest is a group of its own)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for document in documents:
        digest = document["provenance"].get("lock_digest") or f"run:{document['run_id']}"
        groups.setdefault((digest, of_document(document).id), []).append(document)
    return list(groups.values())


def _split(spec: str) -> list[str]:
    runs = [r.strip() for r in spec.split(",")]
    if not all(runs):
        raise UsageError(f"cmx results compare: {spec!r}: an empty run id; give RUN or RUN,RUN,...")
    return runs
