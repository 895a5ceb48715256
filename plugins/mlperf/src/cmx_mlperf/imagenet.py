"""ImageNet 2012 validation from a local path (recipe ``get-dataset-imagenet-val``), verified.

``path`` is the archive ``ILSVRC2012_img_val.tar`` or an ImageNet-style directory (class
subfolders or ``val_map.txt``, what the resnet50 recipe's ``dataset_dir`` takes). The archive
is ``reference`` only when its md5 is the published one (:mod:`cmx_mlperf.references`); a
directory has no published checksum, so it is at best ``named-like-reference`` (50000 images,
not verified) and gets a manifest digest of its files. A reference run refuses anything else.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError
from cmx_mlperf import references, targets

NAME = "ImageNet 2012 validation"
SIZE = 50000
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png", ".npy")


def inspect(path: Path) -> dict[str, Any]:
    """name, path, digest (md5 of an archive, else a manifest sha256), samples, verdict."""
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise UsageError(f"dataset {path}: neither a tar archive nor a directory of images")
        with tarfile.open(path) as archive:
            samples = sum(1 for m in archive if m.isfile() and m.name.lower().endswith(IMAGE_SUFFIXES))
        reference = references.verify_file(path, "resnet50", "dataset")
        digest = references.file_checksum(path, "md5")
        verdict = targets.REFERENCE if reference else (
            targets.NAMED_LIKE if path.name == "ILSVRC2012_img_val.tar" else targets.OTHER)
        return {"name": NAME if verdict != targets.OTHER else f"local {path.name}", "path": str(path.resolve()),
                "digest": f"md5:{digest}", "samples": samples, "verdict": verdict}
    if not path.is_dir():
        raise UsageError(f"dataset {path}: not a file or a directory")
    images = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise UsageError(f"dataset {path}: no images ({', '.join(IMAGE_SUFFIXES)}) found")
    lines = "".join(f"{p.relative_to(path).as_posix()}  {references.file_checksum(p, 'sha256')}\n" for p in images)
    verdict = targets.NAMED_LIKE if len(images) == SIZE else targets.OTHER
    return {"name": NAME if verdict == targets.NAMED_LIKE else f"local {path.name}", "path": str(path.resolve()),
            "digest": "sha256:" + hashlib.sha256(lines.encode()).hexdigest(), "samples": len(images),
            "verdict": verdict}


def get_step(ctx: Any) -> dict[str, Any]:
    """Entry point of the ``get-dataset-imagenet-val`` recipe (built-in ``python`` step)."""
    found = inspect(Path(str(ctx.params.get("path") or "")).expanduser())
    if ctx.params.get("reference") and found["verdict"] != targets.REFERENCE:
        raise UsageError(f"dataset {found['path']}: refused for a reference run: {found['digest']} is not the "
                         f"published checksum of {NAME} ({found['verdict']}; docs/models.md)")
    return found
