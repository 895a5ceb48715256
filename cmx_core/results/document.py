"""Build the normalized result document of one run from what the engine knows about it."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import date, datetime, timezone
from enum import Enum
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from cmx_core import __version__
from cmx_core.errors import ResultsError
from cmx_core.providers.attempts import Attempt
from cmx_core.results import facts_map
from cmx_core.results.faults import attempts_section, faults_section
from cmx_core.results.gitinfo import engine_git_commit
from cmx_core.results.hardware import from_system
from cmx_core.results.validate import SCHEMA_VERSION

if TYPE_CHECKING:
    from cmx_core.providers.types import CachedMeasurement, RunError
    from cmx_core.providers.values import ResultPart

_BENCHMARK_KEYS = (
    "suite", "suite_version", "task", "scenario", "mode", "division", "variant",
    "mlperf_name", "availability", "primary_metric",
)
_OMITTED_WHEN_NULL = ("division", "mlperf_name", "availability")
"""Keys only some suites have: absent, not ``null``, from the results of the others. MLPerf's
``mlperf_name`` and ``availability`` belong in its ``mlperf`` section (older results carry
them here; :mod:`cmx_core.results.suite_fields` reads both)."""
_SOFTWARE_OVERRIDES = ("framework", "framework_version")


@dataclass(frozen=True)
class RunRecord:
    """Everything the engine knows about a finished (or failed) run.

    ``recipes`` are ``(name, version, digest, source)``; ``plugins`` are
    ``(name, distribution, version)``; ``artifacts`` are ``(path, kind)`` with paths inside
    ``run_dir`` (absolute or relative to it); ``error`` is ``(message, node, step)``.
    ``cached_measurement`` says the measurement was served from the cache (it becomes
    ``provenance.cached_measurement``); ``system_extra`` holds ``system`` keys an executor
    knows (e.g. ``container``), merged over the ones derived from the facts.
    """

    run_id: str
    tags: Sequence[str]
    inputs: Mapping[str, Any]
    variations: Mapping[str, Any]
    recipe_name: str
    recipe_tags: Sequence[str]
    recipe_version: str | None
    recipes: Sequence[tuple[str, str | None, str, str | None]]
    plugins: Sequence[tuple[str, str | None, str | None]]
    facts: Mapping[str, Any]
    outputs: Mapping[str, Any]
    part: ResultPart | None
    artifacts: Sequence[tuple[Path, str]]
    run_dir: Path
    started_at: datetime
    finished_at: datetime
    lock_digest: str | None
    error: tuple[str, str | None, str | None] | None = None
    cached_measurement: CachedMeasurement | None = None
    system_extra: Mapping[str, Any] = field(default_factory=dict)
    sweep: Mapping[str, Any] | None = None
    repos: Sequence[Mapping[str, str]] = ()
    """The added recipe repositories the run's catalog had: name, url, commit, kind."""
    telemetry: Mapping[str, Any] | None = None
    """The run sampler's section (``telemetry`` in the document), when the run was sampled."""
    error_cause: RunError | None = None
    """The failed step's ``cause``, ``evidence``, ``signal`` and ``rank``, when its own evidence shows why."""
    facts_file: Mapping[str, str] | None = None
    """``{path, sha256}`` of the ``--facts`` file the run was planned with (``provenance.facts_file``)."""
    attempts: Sequence[Attempt] = ()
    """The attempts of steps that failed, were retried or had a fault injected (docs/faults.md)."""
    injections: Sequence[Mapping[str, Any]] = ()
    """The faults the run was asked to inject (``provenance.injections``)."""
    conditions: Mapping[str, Any] | None = None
    """The measured window's conditions and noise warnings (``conditions``; docs/busy-machine.md)."""
    queued_s: float | None = None
    """Seconds in a scheduler's queue before the run started (``timing.queue_s``)."""


def build_document(record: RunRecord) -> dict[str, Any]:
    """Return the result document (a plain JSON-safe dict; not yet validated)."""
    part = record.part
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": record.run_id,
        "created_at": utc_timestamp(datetime.now(timezone.utc)),
        "status": _status(record),
        "invalid_reasons": [str(r) for r in part.invalid_reasons] if part else [],
        "benchmark": _benchmark(record),
        "metrics": _metrics(part.metrics) if part else {},
    }
    if part:
        for name, section in part.sections.items():
            if name != "software":
                document[str(name)] = json_safe(section)
    document.update(
        system=_system(record),
        software=_software(record),
        timing=_timing(record.started_at, record.finished_at, record.queued_s),
        artifacts=[_artifact(record.run_dir, path, kind) for path, kind in record.artifacts],
        outputs=json_safe(dict(record.outputs)),
        error=_error(record.error, record.error_cause),
        provenance=_provenance(record),
    )
    if record.telemetry is not None:
        document["telemetry"] = json_safe(dict(record.telemetry))
    if record.conditions is not None:
        document["conditions"] = json_safe(dict(record.conditions))
    if record.attempts or record.injections:
        document["attempts"] = attempts_section(record.attempts)
        document["faults"] = faults_section(record.attempts)
    if part and part.notes:
        document["notes"] = part.notes
    return document


def _system(record: RunRecord) -> dict[str, Any]:
    system: dict[str, Any] = facts_map.system_section(record.facts)
    system.update(json_safe(dict(record.system_extra)))
    system["hardware_class"] = from_system(system).to_json()
    return system


def _cached_measurement(record: RunRecord) -> dict[str, Any] | None:
    cached = record.cached_measurement
    if cached is None:
        return None
    return {"run_id": str(cached.run_id), "measured_at": str(cached.measured_at),
            "cache_key": str(cached.cache_key)}


def _status(record: RunRecord) -> str:
    if record.error is not None:
        return "error"
    return record.part.status if record.part else "completed"


def _benchmark(record: RunRecord) -> dict[str, Any]:
    benchmark: dict[str, Any] = dict.fromkeys(_BENCHMARK_KEYS)
    benchmark.update(suite="custom", suite_version=record.recipe_version, task=record.recipe_name)
    part = record.part
    if part is not None:
        benchmark.update(json_safe(dict(part.benchmark)))
        if benchmark["primary_metric"] is None and len(part.metrics) == 1:
            benchmark["primary_metric"] = next(iter(part.metrics))
    return {k: v for k, v in benchmark.items() if v is not None or k not in _OMITTED_WHEN_NULL}


def _metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``Metric`` dataclasses (or mappings with the same keys) -> JSON objects."""
    out: dict[str, Any] = {}
    for name, metric in metrics.items():
        if is_dataclass(metric) and not isinstance(metric, type):
            metric = {f.name: getattr(metric, f.name) for f in fields(metric)}
            if not metric.get("samples"):  # one timing, or none: the key is left out
                metric.pop("samples", None)
        out[str(name)] = json_safe(metric)
    return out


def _software(record: RunRecord) -> dict[str, Any]:
    software: dict[str, Any] = {
        "python": facts_map.python_version(record.facts),
        "packages": facts_map.packages(record.facts),
        "engine": {"name": "cmx", "version": __version__, "git_commit": engine_git_commit()},
        "recipe": {
            "name": record.recipe_name,
            "tags": [str(t) for t in record.recipe_tags],
            "version": record.recipe_version,
        },
        "framework": None,
        "framework_version": None,
    }
    extra = record.part.sections.get("software") if record.part else None
    if isinstance(extra, Mapping):
        for key in _SOFTWARE_OVERRIDES:
            if key in extra:
                software[key] = json_safe(extra[key])
        if isinstance(extra.get("packages"), Mapping):
            software["packages"].update(json_safe(dict(extra["packages"])))
    return software


def _timing(started: datetime, finished: datetime, queued_s: float | None = None) -> dict[str, Any]:
    wall = (finished - started).total_seconds()
    timing: dict[str, Any] = {
        "started_at": utc_timestamp(started),
        "finished_at": utc_timestamp(finished),
        "wall_s": max(0.0, round(wall, 6)),
    }
    if queued_s is not None:
        timing["queue_s"] = max(0.0, round(queued_s, 6))
    return timing


def _artifact(run_dir: Path, path: Path, kind: str) -> dict[str, Any]:
    full = path if path.is_absolute() else run_dir / path
    try:
        digest, size = file_sha256(full)
    except OSError as exc:
        raise ResultsError(
            f"{full}: artifact of kind {kind!r} cannot be read ({exc.strerror}); "
            "a step declared an artifact it did not write"
        ) from None
    try:
        shown = full.relative_to(run_dir).as_posix()
    except ValueError:
        shown = full.as_posix()
    return {"path": shown, "sha256": digest, "size_bytes": size, "kind": kind}


def file_sha256(path: Path) -> tuple[str, int]:
    """Return ``(hex sha256, size in bytes)`` of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _error(error: tuple[str, str | None, str | None] | None,
           cause: RunError | None = None) -> dict[str, Any] | None:
    if error is None:
        return None
    message, node, step = error
    out: dict[str, Any] = {
        "message": str(message) or "unknown error",
        "node": None if node is None else str(node),
        "step": None if step is None else str(step),
    }
    if cause is not None and cause.cause:
        out.update(cause=str(cause.cause), evidence=[str(line) for line in cause.evidence])
        out.update({key: value for key, value in (("signal", cause.signal), ("rank", cause.rank)) if value is not None})
    return out


def _provenance(record: RunRecord) -> dict[str, Any]:
    return {
        "query": {
            "tags": [str(t) for t in record.tags],
            "inputs": json_safe(dict(record.inputs)),
            "variations": json_safe(dict(record.variations)),
        },
        "recipes": [
            {"name": n, "version": v, "digest": d, "source": None if s is None else str(s)}
            for n, v, d, s in record.recipes
        ],
        "plugins": [{"name": n, "distribution": d, "version": v} for n, d, v in record.plugins],
        "lock_digest": record.lock_digest,
        "cmx_version": __version__,
        "cached_measurement": _cached_measurement(record),
        **({"sweep": json_safe(dict(record.sweep))} if record.sweep else {}),
        **({"repos": [json_safe(dict(r)) for r in record.repos]} if record.repos else {}),
        **({"facts_file": dict(record.facts_file)} if record.facts_file else {}),
        **({"injections": json_safe([dict(i) for i in record.injections])} if record.injections else {}),
    }


def utc_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with millisecond precision and a ``Z`` suffix (naive = local time)."""
    text = moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def json_safe(value: Any) -> Any:
    """Convert to JSON data: paths -> str, tuples/sets -> lists, NaN/inf -> null, dataclasses,
    enums and datetimes to their plain forms; anything else unknown -> ``str(value)``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(v) for v in value), key=repr)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Enum):
        return json_safe(value.value)
    if isinstance(value, datetime):
        return utc_timestamp(value)
    if isinstance(value, date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name)) for f in fields(value)}
    return str(value)


