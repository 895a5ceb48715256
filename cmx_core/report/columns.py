"""The columns of a comparison: ``RUN`` or ``RUN,RUN,...`` (repeats of one run), and with
``with_repeats`` every stored run sharing a column's lock digest and hardware class.

A replay (``provenance.replay_of``, from ``cmx bundle replay``) counts under its original's
lock digest, on its own side: the replays of a run are repeats of one another, not of the
original. With ``with_repeats`` and one column given, the other side is added as the second
column: a run and its replays (or a replay and its original), side by side."""

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
        if len(columns) == 1:
            other = repeats_of(store, columns[0][0], exclude=taken, side=_other_side(columns[0][0]))
            if not other:
                raise UsageError(f"cmx results compare --repeats {specs[0]}: no replay or original of it is stored; "
                                 "give two or more runs")
            columns.append(other)
    return columns


def lock_key(document: Mapping[str, Any]) -> tuple[str, str]:
    """``(lock digest, side)``: a replay's is its original's digest and ``replay``."""
    provenance = document["provenance"]
    replay_of = provenance.get("replay_of")
    if replay_of:
        return replay_of.get("lock_digest") or f"run:{replay_of['run_id']}", "replay"
    return provenance.get("lock_digest") or f"run:{document['run_id']}", "original"


def _other_side(document: Mapping[str, Any]) -> str:
    return "original" if lock_key(document)[1] == "replay" else "replay"


def repeats_of(store: Any, document: Mapping[str, Any], exclude: set[str],
               side: str | None = None) -> list[dict[str, Any]]:
    """Stored runs of the same lock (digest) on the same hardware class, oldest first; on
    ``side`` (``original`` or ``replay``), by default the document's own."""
    digest, own = lock_key(document)
    if digest.startswith("run:") and side is None:
        return []
    wanted = (digest, side or own)
    hardware = of_document(document).id
    found = []
    for summary in reversed(store.list(limit=_SCAN_LIMIT, recipe=document["software"]["recipe"]["name"])):
        if summary.run_id in exclude:
            continue
        other = store.get(summary.run_id).document
        if lock_key(other) == wanted and of_document(other).id == hardware:
            found.append(other)
    return found


def group_by_lock(documents: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Documents grouped by (lock digest, hardware class), groups in order of first appearance
    (a document without a lock digest is a group of its own)."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for document in documents:
        digest, side = lock_key(document)
        groups.setdefault((digest, side, of_document(document).id), []).append(document)
    return list(groups.values())


def _split(spec: str) -> list[str]:
    runs = [r.strip() for r in spec.split(",")]
    if not all(runs):
        raise UsageError(f"cmx results compare: {spec!r}: an empty run id; give RUN or RUN,RUN,...")
    return runs
