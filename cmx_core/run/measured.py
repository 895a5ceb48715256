"""Measurements in the cache: what a measuring node's cache entry keeps (its whole result
parts and artifacts, and which run measured them), and how a hit gets them back.

A measuring node (one of its step types says ``measures=True``) is cached only when its
recipe asks (``cache: {measurements: true}``). Its entry's ``meta.json`` then holds the
result parts, the artifacts relative to the entry's files and the measuring run's id and
time, so a later result carries the same metrics, task and artifacts, labelled as a
cached measurement (``provenance.cached_measurement``).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cmx_core.datautil import to_plain as json_safe
from cmx_core.errors import CacheError
from cmx_core.providers.types import CachedMeasurement
from cmx_core.providers.values import Artifact, Metric, ResultPart

ARTIFACTS_DIR = ".artifacts"


def part_to_json(part: ResultPart) -> dict[str, Any]:
    """A result part as JSON data (metrics as objects)."""
    return {
        "status": part.status, "benchmark": json_safe(dict(part.benchmark)),
        "metrics": {name: asdict(metric) if isinstance(metric, Metric) else json_safe(metric)
                    for name, metric in part.metrics.items()},
        "invalid_reasons": list(part.invalid_reasons), "sections": json_safe(dict(part.sections)),
        "notes": part.notes,
    }


def part_from_json(data: Mapping[str, Any], where: str) -> ResultPart:
    """The inverse of :func:`part_to_json`; a CacheError naming ``where`` when malformed."""
    try:
        metrics = {str(k): Metric(v["value"], str(v["unit"]), bool(v["higher_is_better"]),
                                  tuple(float(x) for x in v.get("samples") or ()))
                   for k, v in dict(data.get("metrics") or {}).items()}
        return ResultPart(status=data["status"], benchmark=dict(data.get("benchmark") or {}),
                          metrics=metrics, invalid_reasons=tuple(str(r) for r in data.get("invalid_reasons") or ()),
                          sections=dict(data.get("sections") or {}), notes=str(data.get("notes") or ""))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CacheError(f"{where}: the cached measurement is malformed ({type(exc).__name__}: {exc}); "
                         "remove the entry with 'cmx cache rm'") from None


def stage_artifacts(artifacts: Sequence[Artifact], files: Path) -> list[dict[str, str]]:
    """Artifacts as paths relative to the entry's ``files``; those written elsewhere are
    copied in first (the entry must hold what the measurement produced)."""
    kept = []
    for index, artifact in enumerate(artifacts):
        path = Path(artifact.path)
        try:
            relative = path.resolve().relative_to(files.resolve())
        except ValueError:
            target = files / ARTIFACTS_DIR / f"{index}-{path.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            relative = target.relative_to(files)
        kept.append({"path": relative.as_posix(), "kind": artifact.kind})
    return kept


def measurement_meta(parts: Sequence[ResultPart], artifacts: list[dict[str, str]], run_id: str,
                     measured_at: str) -> dict[str, Any]:
    return {"parts": [part_to_json(p) for p in parts], "artifacts": artifacts,
            "run_id": run_id, "measured_at": measured_at}


class Served:
    """What a cache hit of a measuring node gives back."""

    def __init__(self, parts: tuple[ResultPart, ...], artifacts: tuple[Artifact, ...],
                 provenance: CachedMeasurement) -> None:
        self.parts = parts
        self.artifacts = artifacts
        self.provenance = provenance


def served(meta: Mapping[str, Any], entry_path: Path, key: str) -> Served | None:
    """The measurement an entry holds, or None when it holds none (a producer's entry, or
    one written before measurements were kept). Missing artifact files make it unusable."""
    data = meta.get("measurement")
    if not isinstance(data, Mapping):
        return None
    where = str(entry_path / "meta.json")
    parts = tuple(part_from_json(p, where) for p in data.get("parts") or ())
    artifacts = []
    for item in data.get("artifacts") or ():
        path = entry_path / "files" / str(item["path"])
        if not path.is_file():
            return None
        artifacts.append(Artifact(path, str(item["kind"])))
    provenance = CachedMeasurement(str(data.get("run_id", "")), str(data.get("measured_at", "")), key)
    return Served(parts, tuple(artifacts), provenance)
