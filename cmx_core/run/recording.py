"""Recording a run: the engine alone turns an executor's typed outcome into the result
document, validates it once, writes it and indexes it.

Besides ``result.json`` the run directory gets ``nodes.json`` (what happened to each node)
and ``facts.json`` (the facts of the machine the plan ran on), which a remote executor's far
side writes too and the near side reads back (see :mod:`cmx_core.run.remote`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core import paths
from cmx_core.datautil import atomic_write, thaw
from cmx_core.errors import ResultsError
from cmx_core.facts.store import SYSTEM_FACTS
from cmx_core.plugins.registry import ExecutionRequest
from cmx_core.providers.types import ExecutionOutcome, RunError
from cmx_core.results.document import RunRecord, build_document
from cmx_core.results.secrets import redact_data, redact_tree, run_secrets
from cmx_core.results.store import ResultStore
from cmx_core.results.writer import write_result
from cmx_core.run.facts_check import FactsFileRef

if TYPE_CHECKING:
    from cmx_core.plugins.events import EventSink
    from cmx_core.results.document import RunRecord

NODES_FILE = "nodes.json"
FACTS_FILE = "facts.json"


@dataclass(frozen=True)
class Provenance:
    """What the engine adds to every result besides the outcome."""

    lock_digest: str
    plugins: Sequence[tuple[str, str, str]]
    sweep: Mapping[str, Any] | None = None  # {"id", "index", "point"} of a run that is a sweep point
    repos: Sequence[Mapping[str, str]] = ()  # the recipe repositories: name, url, commit, kind
    facts_file: FactsFileRef | None = None  # the --facts file the run was planned with
    injections: Sequence[Mapping[str, Any]] = ()  # the faults the run injects (docs/faults.md)


def failed_outcome(started: float, error: RunError) -> ExecutionOutcome:
    """The outcome of an executor that failed before it could report anything."""
    return ExecutionOutcome(nodes=(), root_outputs={}, started=started, finished=time.time(), error=error)


def record_run(request: ExecutionRequest, outcome: ExecutionOutcome, provenance: Provenance,
               events: EventSink, conditions: Mapping[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """Write ``result.json`` (validated once), ``nodes.json`` and ``facts.json``; index the
    result; return its path and document. ``conditions`` is the measured window's section
    (:mod:`cmx_core.run.conditions`), None when the run was not measured here. A document that fails validation (a suite
    section that breaks its schema, say) is recorded as an error result instead."""
    secrets = run_secrets()  # the run's own secret values: never kept in what it writes
    redact_tree(request.run_dir, secrets)  # the logs and outputs its steps wrote
    facts = dict(outcome.facts) if outcome.facts is not None else request.context.facts.snapshot(SYSTEM_FACTS)
    _write_json(request.run_dir / NODES_FILE, redact_data([_node_json(n) for n in outcome.nodes], secrets))
    _write_json(request.run_dir / FACTS_FILE, facts)
    record = replace(run_record(request, outcome, provenance, facts), conditions=conditions)
    path, document = _write(request, record, secrets)
    _index(document, path)
    events("cmx_result_written", path=path, document=document)
    return path, document


def _write(request: ExecutionRequest, record: RunRecord,
           secrets: Sequence[str] = ()) -> tuple[Path, dict[str, Any]]:
    document = redact_data(build_document(record), secrets)
    try:
        return write_result(request.run_dir, document, suites=request.context.registry.suites), document
    except ResultsError as exc:
        if record.error is not None:
            raise
        why = str(exc)
    failed = replace(record, part=None, artifacts=[], cached_measurement=None,
                     error=(f"the run's result could not be recorded: {why}", None, None))
    document = build_document(failed)
    return write_result(request.run_dir, document, suites=request.context.registry.suites), document


def run_record(request: ExecutionRequest, outcome: ExecutionOutcome, provenance: Provenance,
               facts: Mapping[str, Any]) -> RunRecord:
    """Everything the result document says, from the request and the outcome."""
    plan = request.context.plan
    root = plan.root
    error = outcome.error
    artifacts = [(a.path, a.kind) for a in outcome.all_artifacts()] + [(p, "log") for p in outcome.logs]
    return RunRecord(
        run_id=request.run_id, tags=list(plan.query.tags), inputs=dict(root.inputs),
        variations=dict(root.variations), recipe_name=root.recipe.name, recipe_tags=list(root.recipe.tags),
        recipe_version=root.recipe.version,
        recipes=[(n.recipe.name, n.recipe.version, n.recipe.digest, n.recipe.source) for n in plan.nodes],
        plugins=list(provenance.plugins), facts=facts, outputs=thaw(outcome.root_outputs),
        part=outcome.result_part(), artifacts=artifacts, run_dir=request.run_dir,
        started_at=datetime.fromtimestamp(outcome.started, timezone.utc),
        finished_at=datetime.fromtimestamp(outcome.finished or time.time(), timezone.utc),
        lock_digest=provenance.lock_digest,
        error=(error.message, error.node, error.step) if error else None,
        cached_measurement=outcome.cached_measurement(), system_extra=dict(outcome.system),
        sweep=provenance.sweep, repos=provenance.repos, telemetry=outcome.telemetry,
        facts_file=provenance.facts_file.to_json() if provenance.facts_file else None,
        error_cause=error if error and error.cause else None,
        attempts=outcome.attempts, injections=provenance.injections, queued_s=outcome.queued_s,
    )


def _node_json(node: Any) -> dict[str, Any]:
    return {"node_id": node.node_id, "recipe": node.recipe, "status": node.status,
            "wall_s": round(node.wall_s, 6), "cache_key": node.cache_key,
            "cached_measurement": asdict(node.cached_measurement) if node.cached_measurement else None}


def _index(document: dict[str, Any], result_path: Path) -> None:
    ResultStore(paths.results_db()).index(document, result_path, validated=True)  # write_result did


def _write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=True, default=str))

