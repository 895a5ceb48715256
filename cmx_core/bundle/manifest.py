"""The bundle manifest (``cmx-bundle.json``): every member's sha256 and size, the runs, what
was redacted or left out, sealed by ``digest``: the sha256 of its canonical JSON without that
key. The member must be exactly that canonical JSON, so any changed byte in it is caught."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmx_core.bundle import FORMAT, MANIFEST
from cmx_core.errors import ResultsError


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int


@dataclass(frozen=True)
class BundledRun:
    run_id: str
    dir: str
    recipe: str
    lock_digest: str | None
    hardware_class: str


@dataclass(frozen=True)
class Manifest:
    created_at: str
    cmx_version: str
    runs: tuple[BundledRun, ...]
    files: Mapping[str, FileEntry]
    redacted: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    signed: bool = False
    """The bundle carries a signature of this manifest (so removing it is caught)."""

    def body(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "created_at": self.created_at, "cmx_version": self.cmx_version,
            "runs": [dict(r.__dict__) for r in self.runs],
            "files": {p: {"sha256": e.sha256, "size": e.size} for p, e in sorted(self.files.items())},
            "redacted": list(self.redacted), "skipped": dict(sorted(self.skipped.items())),
            "signed": self.signed,
        }

    def to_bytes(self) -> bytes:
        body = self.body()
        return _canonical({**body, "digest": _digest(body)})


def _canonical(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode("ascii")


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(body)).hexdigest()


def parse_manifest(raw: bytes, bundle: str) -> Manifest:
    """The manifest of ``bundle``; a ResultsError naming the member for anything altered."""
    where = f"{bundle}: member {MANIFEST}"
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ResultsError(f"{where}: not valid JSON ({exc}); the bundle was altered, ask for a new one") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ResultsError(f"{where}: not a {FORMAT} manifest; the bundle was altered or made by another tool")
    body = {k: v for k, v in doc.items() if k != "digest"}
    if doc.get("digest") != _digest(body) or _canonical(doc) != raw:
        raise ResultsError(f"{where}: does not match its digest (a byte of it changed); ask for a new bundle")
    try:
        return Manifest(
            created_at=str(body["created_at"]), cmx_version=str(body["cmx_version"]),
            runs=tuple(BundledRun(**r) for r in body["runs"]),
            files={str(p): FileEntry(str(e["sha256"]), int(e["size"])) for p, e in body["files"].items()},
            redacted=tuple(str(p) for p in body["redacted"]), skipped=dict(body["skipped"]),
            signed=body["signed"] is True,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"{where}: malformed ({exc}); ask for a new bundle") from None
