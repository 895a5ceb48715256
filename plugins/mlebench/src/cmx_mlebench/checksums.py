"""Checksums of a prepared split: the sha256 of every file under ``public`` and ``private``,
written as ``checksums.yaml`` next to the prepared data and checked before it is used.
A competition's own MLE-bench ``checksums.yaml`` (md5 per file under ``public:`` and
``private:``) is checked too when the data is used as-is."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.errors import ResultsError

PARTS = ("public", "private")


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_digests(root: Path, algorithm: str = "sha256") -> dict[str, str]:
    """Relative path -> digest of every regular file below ``root`` (links are refused)."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise ResultsError(f"{path}: a prepared split may not hold symbolic links; prepare the competition again")
        if path.is_file():
            found[path.relative_to(root).as_posix()] = file_digest(path, algorithm)
    return found


def split_digests(prepared: Path) -> dict[str, Any]:
    return {"algorithm": "sha256", **{part: tree_digests(prepared / part) for part in PARTS}}


def write_checksums(path: Path, prepared: Path) -> dict[str, Any]:
    import yaml  # deferred: yaml only when this runs (27 modules)

    digests = split_digests(prepared)
    path.write_text(yaml.safe_dump(digests, sort_keys=True), encoding="utf-8")
    return digests


def read_checksums(path: Path) -> dict[str, Any]:
    import yaml  # deferred: yaml only when this runs (27 modules)

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ResultsError(f"{path}: cannot read the split's checksums ({exc}); prepare the competition again") \
            from None
    if not isinstance(data, Mapping) or not all(isinstance(data.get(p), Mapping) for p in PARTS):
        raise ResultsError(f"{path}: checksums need 'public' and 'private' maps; prepare the competition again")
    return dict(data)


def mismatches(prepared: Path, expected: Mapping[str, Any]) -> list[str]:
    """The files whose digest differs from ``expected`` (or that are missing), as relative paths."""
    algorithm = str(expected.get("algorithm", "sha256"))
    wrong: list[str] = []
    for part in PARTS:
        for name, digest in dict(expected.get(part) or {}).items():
            path = prepared / part / name
            if not path.is_file() or path.is_symlink() or file_digest(path, algorithm) != digest:
                wrong.append(f"{part}/{name}")
    return wrong


def verify(prepared: Path, checksums: Path) -> None:
    """A ResultsError naming the first changed file of the split."""
    wrong = mismatches(prepared, read_checksums(checksums))
    if wrong:
        raise ResultsError(f"{prepared / wrong[0]}: does not match its checksum in {checksums} "
                           f"({len(wrong)} file(s) changed since the split was prepared); prepare it again "
                           "(cmx run recipe --tags=get,mle-bench,competition --refresh ...)")
