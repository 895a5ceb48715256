"""``cmx bundle create``: pack run directories into one verified ``.tar.gz``.

Every member is read, redacted (secret values of the environment and token-looking text are
replaced, and the member is listed under ``redacted``), hashed into the manifest and written
into a staged file renamed over the target at the end: a failure leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cmx_core import __version__
from cmx_core.bundle import CRATE, ENVIRONMENT, MANIFEST, RECIPES, RUNS, SIGNATURE
from cmx_core.bundle.crate import crate_metadata
from cmx_core.bundle.manifest import BundledRun, FileEntry, Manifest
from cmx_core.bundle.sign import sign
from cmx_core.datautil import loads_bounded, read_bounded, read_capped
from cmx_core.errors import UsageError
from cmx_core.results.document import utc_timestamp
from cmx_core.results.hardware import of_document
from cmx_core.results.secrets import DEFAULT_ENV_ALLOW, filtered_environment, redact_bytes, secret_values

MAX_FILE_BYTES = 512 << 20
"""A run file larger than this is left out and listed under ``skipped`` with its size."""


@dataclass(frozen=True)
class BundleOptions:
    env: Mapping[str, str]
    allow: Sequence[str] = DEFAULT_ENV_ALLOW
    key: Path | None = None
    max_file_bytes: int = MAX_FILE_BYTES


@dataclass(frozen=True)
class Created:
    path: Path
    manifest: Manifest

    def to_json(self) -> dict[str, Any]:
        return {"bundle": str(self.path), "runs": [dict(r.__dict__) for r in self.manifest.runs],
                "members": len(self.manifest.files) + 1 + int(self.manifest.signed),
                "redacted": list(self.manifest.redacted), "skipped": dict(self.manifest.skipped),
                "signed": self.manifest.signed}


def create_bundle(run_dirs: Sequence[Path], output: Path, options: BundleOptions) -> Created:
    """Pack ``run_dirs`` (each holding result.json and lock.json) into ``output``."""
    if not str(output).endswith(".tar.gz"):
        raise UsageError(f"-o {output}: a bundle's file name ends in .tar.gz")
    secrets = secret_values(options.env)
    members: dict[str, bytes] = {}
    redacted: list[str] = []
    skipped: dict[str, str] = {}
    runs = [_add_run(Path(d), members, skipped, options.max_file_bytes) for d in run_dirs]
    _check_unique(runs)
    for name in list(members):
        clean = redact_bytes(members[name], secrets)
        if clean != members[name]:
            members[name] = clean
            redacted.append(name)
    members[ENVIRONMENT] = _environment(options)

    members[CRATE] = crate_metadata(members, runs)
    manifest = _manifest(members, runs, redacted, skipped, signed=options.key is not None)
    members[MANIFEST] = manifest.to_bytes()
    if options.key is not None:
        members[SIGNATURE] = sign(members[MANIFEST], options.key)
    _write_tar(output, members)
    return Created(output, manifest)


def _add_run(run_dir: Path, members: dict[str, bytes], skipped: dict[str, str], limit: int) -> BundledRun:
    if not (run_dir / "result.json").is_file() or not (run_dir / "lock.json").is_file():
        raise UsageError(f"{run_dir}: not a run directory (it needs result.json and lock.json); "
                         "give run ids from `cmx results list` or run directories")
    try:
        document = loads_bounded(read_bounded(run_dir / "result.json"))
        lock = loads_bounded(read_bounded(run_dir / "lock.json"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{run_dir}: result.json or lock.json is not readable JSON ({exc})") from None
    prefix = f"{RUNS}/{run_dir.name}"
    for path in sorted(p for p in run_dir.rglob("*") if not p.is_dir() or p.is_symlink()):
        name = f"{prefix}/{path.relative_to(run_dir).as_posix()}"
        if path.is_symlink() or not path.is_file():
            skipped[name] = "not a regular file (a link or a device): left out"
        elif path.stat().st_size > limit:
            skipped[name] = f"{path.stat().st_size} bytes, over the {limit}-byte limit: left out"
        else:
            members[name] = path.read_bytes()
    _add_recipes(lock, members)
    return BundledRun(run_id=str(document["run_id"]), dir=run_dir.name,
                      recipe=str(document["software"]["recipe"]["name"]),
                      lock_digest=document["provenance"].get("lock_digest"), hardware_class=of_document(document).id)


def _add_recipes(lock: Mapping[str, Any], members: dict[str, bytes]) -> None:
    """The recipe files of the lock's ``--recipes`` directories (core and plugin recipes come
    with cmx and its plugins), when their content still has the digest the lock recorded."""
    dirs = [Path(d).resolve() for d in lock.get("query", {}).get("recipes_dirs") or ()]
    for node in lock.get("nodes", []):
        source = Path(str(node.get("source") or ""))
        if not dirs or not source.is_file() or not any(source.resolve().is_relative_to(d) for d in dirs):
            continue
        raw = read_capped(source, MAX_FILE_BYTES)
        if hashlib.sha256(raw).hexdigest() == node.get("digest"):
            members[f"{RECIPES}/{str(node['digest'])[:16]}/{source.name}"] = raw


def _check_unique(runs: Sequence[BundledRun]) -> None:
    seen: dict[str, str] = {}
    for run in runs:
        if run.dir in seen or run.run_id in seen.values():
            raise UsageError(f"run {run.run_id} ({run.dir}) is given twice; name each run once")
        seen[run.dir] = run.run_id


def _environment(options: BundleOptions) -> bytes:
    env = filtered_environment(options.env, options.allow)
    doc = {"variables": dict(env.kept), "redacted": list(env.redacted), "dropped": list(env.dropped),
           "allow": list(options.allow)}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def _manifest(members: Mapping[str, bytes], runs: Sequence[BundledRun], redacted: Sequence[str],
              skipped: Mapping[str, str], *, signed: bool) -> Manifest:
    files = {name: FileEntry(hashlib.sha256(data).hexdigest(), len(data)) for name, data in members.items()}
    return Manifest(utc_timestamp(datetime.now(timezone.utc)), __version__, tuple(runs), files,
                    tuple(sorted(redacted)), dict(skipped), signed)


def _write_tar(output: Path, members: Mapping[str, bytes]) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    staged = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(staged, "w:gz") as archive:
            for name in sorted(members):
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
                archive.addfile(info, io.BytesIO(members[name]))
        staged.replace(output)
    finally:
        staged.unlink(missing_ok=True)
