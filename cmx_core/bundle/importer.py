"""``cmx bundle import``: a verified bundle's runs into this machine's runs directory and
results store, each result marked with its origin (``provenance.origin``). A run already in
the store is left as it is (importing twice is harmless); everything is checked before the
first run directory is written, and each is staged then renamed into place."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cmx_core.bundle import RUNS
from cmx_core.bundle.verify import VerifiedBundle
from cmx_core.errors import ResultsError, UsageError
from cmx_core.results.document import utc_timestamp
from cmx_core.results.validate import validate_document


@dataclass(frozen=True)
class Imported:
    imported: tuple[tuple[str, str], ...]  # (run_id, run dir)
    already: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"imported": [{"run_id": r, "run_dir": d} for r, d in self.imported], "already": list(self.already)}


def import_bundle(bundle: VerifiedBundle, store: Any, runs_dir: Path) -> Imported:
    pending, already = [], []
    for run in bundle.manifest.runs:
        if _stored(store, run.run_id):
            already.append(run.run_id)
            continue
        target = runs_dir / run.dir
        if target.exists():
            raise UsageError(f"{target}: exists but run {run.run_id} is not in the store; move it away or run "
                             "`cmx results reindex`, then import again")
        document = _with_origin(json.loads(bundle.members[f"{RUNS}/{run.dir}/result.json"]), bundle)
        validate_document(document, source=f"{bundle.path}: {RUNS}/{run.dir}/result.json")
        pending.append((run.run_id, run.dir, document))
    done = [(run_id, str(_write_run(bundle, runs_dir, directory, document, store)))
            for run_id, directory, document in pending]
    return Imported(tuple(done), tuple(already))


def _stored(store: Any, run_id: str) -> bool:
    try:
        return bool(store.resolve(run_id)[0] == run_id)
    except ResultsError:
        return False


def _with_origin(document: dict[str, Any], bundle: VerifiedBundle) -> dict[str, Any]:
    origin = {"kind": "bundle", "bundle": bundle.path.name, "bundle_sha256": bundle.sha256,
              "imported_at": utc_timestamp(datetime.now(timezone.utc)), "created_by": bundle.manifest.cmx_version}
    return {**document, "provenance": {**document["provenance"], "origin": origin}}


def _write_run(bundle: VerifiedBundle, runs_dir: Path, directory: str, document: Mapping[str, Any],
               store: Any) -> Path:
    prefix = f"{RUNS}/{directory}/"
    staged = runs_dir / f".import-{directory}"
    shutil.rmtree(staged, ignore_errors=True)
    try:
        for name, data in bundle.members.items():
            if name.startswith(prefix):
                path = staged / name[len(prefix):]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        (staged / "result.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        target = runs_dir / directory
        staged.rename(target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    store.index(document, target / "result.json", validated=True)
    return target
