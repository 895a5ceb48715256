"""The reference weights and datasets of the benchmarks cmx runs, with their published
checksums where one is known offline (docs/models.md shows this table; a test keeps both in
step). A checksum not known offline is ``None``: none is ever guessed.

A published checksum is of what its publisher ships (an archive's md5, a file's sha256);
cmx's own digest of a model's weights is the result's ``model.sha256`` (the sha256 of
``SHA256  NAME`` lines of the weight files, cmx-detect's ``weights_digest``). Only equal
bytes verify: :func:`verify_file` compares a file with
the published checksum, and :data:`cmx_mlperf.targets.BENCHMARKS` lists the manifest digests
known to be the reference (none shipped yet: no verified copy was at hand offline).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError


@dataclass(frozen=True)
class Reference:
    benchmark: str  # cmx's model key (llama3_1-8b, resnet50)
    kind: str  # weights | dataset
    name: str
    artifact: str  # what the checksum is of
    size: str  # parameters or samples
    algorithm: str | None  # md5 | sha256, None when no checksum is known offline
    checksum: str | None
    source: str  # where the name, artifact and checksum come from


REFERENCES: tuple[Reference, ...] = (
    Reference("llama3_1-8b", "weights", "meta-llama/Llama-3.1-8B-Instruct", "the Hugging Face repository",
              "8.03e9 parameters", None, None,
              "MLPerf Inference llama3.1-8b reference README (weights id); no checksum known offline"),
    Reference("llama3_1-8b", "dataset", "CNN/DailyMail 3.0.0 validation (cnn_eval.json)", "cnn_eval.json",
              "13368 samples", None, None,
              "MLPerf Inference llama3.1-8b reference README and mlperf.conf (sample count); "
              "no checksum known offline"),
    Reference("resnet50", "weights", "ResNet-50 v1.5 (resnet50_v1.onnx)", "resnet50_v1.onnx (zenodo record 2592612)",
              "2.56e7 parameters", None, None,
              "MLPerf Inference vision reference README (file and record); no checksum known offline"),
    Reference("resnet50", "dataset", "ImageNet 2012 validation", "ILSVRC2012_img_val.tar", "50000 samples",
              "md5", "29b22e2961454d5413ddabcf34fc5622",
              "image-net.org's ILSVRC2012 download page, also torchvision.datasets.ImageNet's ARCHIVE_META"),
)


def references(benchmark: str, kind: str) -> list[Reference]:
    return [r for r in REFERENCES if r.benchmark == benchmark and r.kind == kind]


def file_checksum(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, benchmark: str, kind: str) -> Reference | None:
    """The reference ``path`` is byte for byte (its published checksum matches), else None.
    A path that is not a file is a UsageError."""
    if not path.is_file():
        raise UsageError(f"{path}: not a file; give the reference's {kind} file to verify")
    for ref in references(benchmark, kind):
        if ref.algorithm and ref.checksum and file_checksum(path, ref.algorithm) == ref.checksum:
            return ref
    return None
