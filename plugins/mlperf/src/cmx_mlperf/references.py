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


MLC_SCRIPTS = "mlcommons/mlperf-automations"
"""MLC's script repository; ``script/<name>/meta.yaml`` records each download's
``MLC_DOWNLOAD_CHECKSUM`` (an md5 of the file as served)."""

REFERENCES: tuple[Reference, ...] = (
    # MLC's script/get-ml-model-llama3/meta.yaml records no checksum: its r2-downloader reads
    # the file list and checksums from a metadata file online at download time.
    Reference("llama3_1-8b", "weights", "meta-llama/Llama-3.1-8B-Instruct", "the Hugging Face repository",
              "8.03e9 parameters", None, None,
              "MLPerf Inference llama3.1-8b reference README (weights id, pinned at Hugging Face revision "
              "be673f326cab4cd22ccfef76109faf68e41aa5f1); neither it nor MLC's get-ml-model-llama3 records a "
              "file checksum, so no checksum known offline"),
    # MLC's script/get-dataset-cnndm/meta.yaml records none either (the same online metadata file).
    Reference("llama3_1-8b", "dataset", "CNN/DailyMail 3.0.0 validation (cnn_eval.json)", "cnn_eval.json",
              "13368 samples", None, None,
              "MLPerf Inference llama3.1-8b reference README and mlperf.conf (sample count); neither they nor "
              "MLC's get-dataset-cnndm record a checksum, so no checksum known offline"),
    # md5 from MLC's script/get-ml-model-resnet50/meta.yaml, variation "onnx,opset-8" (zenodo 2592612).
    Reference("resnet50", "weights", "ResNet-50 v1.5 (resnet50_v1.onnx)", "resnet50_v1.onnx (zenodo record 2592612)",
              "2.56e7 parameters", "md5", "a638cf028b5870da29e09ccc2f7182e7",
              "MLPerf Inference vision reference README (file and record); md5 from "
              f"{MLC_SCRIPTS} script/get-ml-model-resnet50/meta.yaml (onnx,opset-8)"),
    # md5 from the same file, variation "onnx,opset-11" (zenodo 4735647, the opset-11 export).
    Reference("resnet50", "weights", "ResNet-50 v1.5 (resnet50_v1.onnx, opset 11)",
              "resnet50_v1.onnx (zenodo record 4735647)", "2.56e7 parameters", "md5",
              "f6a4da60cd5f084d97efc2c1ddb10beb",
              f"{MLC_SCRIPTS} script/get-ml-model-resnet50/meta.yaml (onnx,opset-11: file, record and md5)"),
    # Also MLC's script/get-dataset-imagenet-val/meta.yaml (MLC_DOWNLOAD_CHECKSUM of the full set).
    Reference("resnet50", "dataset", "ImageNet 2012 validation", "ILSVRC2012_img_val.tar", "50000 samples",
              "md5", "29b22e2961454d5413ddabcf34fc5622",
              "image-net.org's ILSVRC2012 download page, also torchvision.datasets.ImageNet's ARCHIVE_META and "
              f"{MLC_SCRIPTS} script/get-dataset-imagenet-val/meta.yaml"),
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
