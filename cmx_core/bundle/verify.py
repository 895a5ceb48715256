"""``cmx bundle verify``: every member against the manifest. A changed, added or removed
member, a manifest that does not match itself, or a bad signature is a ResultsError (exit 2)
naming the member; nothing else in cmx reads a bundle that did not pass."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.bundle import MANIFEST, SIGNATURE, sign
from cmx_core.bundle.manifest import Manifest, parse_manifest
from cmx_core.bundle.members import Limits, read_members
from cmx_core.bundle.trust import TrustPolicy
from cmx_core.errors import ResultsError


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle that passed: its manifest, member bytes, own sha256 and signature status."""

    path: Path
    sha256: str
    manifest: Manifest
    members: Mapping[str, bytes]
    signature: str
    signature_checked: bool = False
    """The signature verified against the reader's allowed signers (else nothing says who made it)."""

    @property
    def unchecked_note(self) -> str | None:
        """What a reader is told when no signature was checked; None when one was."""
        if self.signature_checked:
            return None
        what = "the bundle is unsigned" if self.signature == "unsigned" else f"the bundle is {self.signature}"
        return (f"{self.path}: signature not checked ({what}): nothing says who made it; configure allowed "
                "signers and --require-signature (docs/bundles.md, Trust)")

    def to_json(self) -> dict[str, Any]:
        return {"bundle": str(self.path), "sha256": self.sha256, "verified": True,
                "members": len(self.members), "signature": self.signature,
                "signature_checked": self.signature_checked,
                "runs": [dict(r.__dict__) for r in self.manifest.runs],
                "redacted": list(self.manifest.redacted), "skipped": dict(self.manifest.skipped)}


def verify_bundle(path: Path, trust: TrustPolicy | None = None, bounds: Limits | None = None) -> VerifiedBundle:
    """Verify ``path``'s members (within ``bounds``), then its signature under the reader's
    ``trust`` policy."""
    members = read_members(path, bounds)
    if MANIFEST not in members:
        raise ResultsError(f"{path}: member {MANIFEST} is missing; not a cmx bundle (or it was altered)")
    manifest = parse_manifest(members[MANIFEST], str(path))
    _check_files(path, manifest, members)
    _check_signature_member(path, manifest, members)
    signature, checked = _signature(path, members, trust or TrustPolicy())
    return VerifiedBundle(path, _file_sha256(path), manifest, members, signature, checked)


def _check_files(path: Path, manifest: Manifest, members: Mapping[str, bytes]) -> None:
    listed = set(manifest.files)
    present = set(members) - {MANIFEST, SIGNATURE}
    for name in sorted(present - listed):
        raise ResultsError(f"{path}: member {name} is not in the manifest (added after the bundle was made)")
    for name in sorted(listed - present):
        raise ResultsError(f"{path}: member {name} is in the manifest but missing (removed from the bundle)")
    for name in sorted(listed):
        entry, data = manifest.files[name], members[name]
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise ResultsError(f"{path}: member {name} changed: its sha256 or size does not match the manifest")
    if {r.dir for r in manifest.runs} - {n.split("/")[1] for n in listed if n.startswith("runs/") and "/" in n[5:]}:
        raise ResultsError(f"{path}: member {MANIFEST} lists a run whose directory is not in the bundle")


def _check_signature_member(path: Path, manifest: Manifest, members: Mapping[str, bytes]) -> None:
    if manifest.signed and SIGNATURE not in members:
        raise ResultsError(f"{path}: member {SIGNATURE} is missing (removed: the manifest says the bundle is signed)")
    if not manifest.signed and SIGNATURE in members:
        raise ResultsError(f"{path}: member {SIGNATURE} is not in the manifest (added: the bundle was made unsigned)")


def _signature(path: Path, members: Mapping[str, bytes], trust: TrustPolicy) -> tuple[str, bool]:
    """The signature's status and whether it was checked against trusted keys; a
    ResultsError for a signature that is garbage, by an untrusted key, bad, or missing when
    the policy requires one."""
    if SIGNATURE not in members:
        if trust.require:
            raise ResultsError(f"{path}: member {SIGNATURE} is missing: the bundle is not signed (or its signature "
                               "was stripped), and a signature is required")
        return "unsigned", False
    key = sign.check(members[MANIFEST], members[SIGNATURE], path)  # garbage is refused under any policy
    if trust.allowed_signers is None:
        return f"signed by {key}, not checked", False
    identity = trust.identity or sign.principal(members[SIGNATURE], trust.allowed_signers, path)
    return "verified: " + sign.verify(members[MANIFEST], members[SIGNATURE], trust.allowed_signers, identity,
                                      path), True


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
