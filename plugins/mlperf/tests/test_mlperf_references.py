"""The reference table (cmx_mlperf.references) and docs/models.md, which shows it; a file is
verified only by its bytes."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_mlperf import references, targets

DOC = Path(__file__).resolve().parents[3] / "docs" / "models.md"


def _row(ref: references.Reference) -> str:
    checksum = f"{ref.algorithm} {ref.checksum}" if ref.checksum else "not known offline"
    return f"| {ref.benchmark} | {ref.kind} | {ref.name} | {ref.artifact} | {ref.size} | {checksum} | {ref.source} |"


def test_the_doc_table_is_the_code_table() -> None:
    text = DOC.read_text()
    block = text[text.index("<!-- references:begin -->"):text.index("<!-- references:end -->")]
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| Benchmark")]
    assert rows == [_row(r) for r in references.REFERENCES]


def test_every_reference_says_where_it_came_from_and_no_checksum_is_half_given() -> None:
    for ref in references.REFERENCES:
        assert ref.source and (ref.algorithm is None) == (ref.checksum is None)
        if ref.checksum is None:
            assert "no checksum known offline" in ref.source
    assert {(r.benchmark, r.kind) for r in references.REFERENCES} >= {
        ("llama3_1-8b", "weights"), ("llama3_1-8b", "dataset"), ("resnet50", "weights"), ("resnet50", "dataset")}


def test_the_table_names_agree_with_the_benchmark_targets() -> None:
    bench = targets.BENCHMARKS["llama3_1-8b"]
    assert references.references("llama3_1-8b", "weights")[0].name == bench.weights
    assert references.references("llama3_1-8b", "dataset")[0].name == bench.dataset
    assert str(bench.dataset_size) in references.references("llama3_1-8b", "dataset")[0].size


def test_a_file_is_verified_by_its_bytes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "ILSVRC2012_img_val.tar"
    good.write_bytes(b"the published bytes")
    published = dataclasses.replace(references.references("resnet50", "dataset")[0], algorithm="sha256",
                                    checksum=hashlib.sha256(b"the published bytes").hexdigest())
    monkeypatch.setattr(references, "REFERENCES", (published,))
    assert references.verify_file(good, "resnet50", "dataset") == published
    named_alike = tmp_path / "other" / "ILSVRC2012_img_val.tar"
    named_alike.parent.mkdir()
    named_alike.write_bytes(b"other bytes")
    assert references.verify_file(named_alike, "resnet50", "dataset") is None
    with pytest.raises(UsageError, match="not a file"):
        references.verify_file(tmp_path, "resnet50", "dataset")


def test_detected_weights_digest_is_what_the_result_records(tiny_llama: Path) -> None:
    """cmx-detect's weights_digest of a model equals cmx-mlperf's model.sha256 of it, so a
    digest listed as the reference's verifies a detected model and a run of it alike."""
    from cmx_detect.models import describe
    from cmx_mlperf.llm.describe import local_model_info

    detected = describe(tiny_llama)
    recorded = local_model_info(tiny_llama)
    assert detected.weights_digest is not None and detected.weights_digest == recorded["sha256"]
    assert detected.digest != detected.weights_digest  # the manifest covers every file, not only weights


def test_published_checksums_are_well_formed_and_cite_their_script() -> None:
    """Each checksum is hex of its algorithm's length; one taken from MLC's scripts names the
    script's meta file it was read from (the resnet50 weights: both ONNX exports)."""
    lengths = {"md5": 32, "sha256": 64}
    for ref in references.REFERENCES:
        if ref.checksum is not None:
            assert ref.algorithm in lengths and len(ref.checksum) == lengths[ref.algorithm]
            assert int(ref.checksum, 16) >= 0 and ref.checksum == ref.checksum.lower()
    weights = references.references("resnet50", "weights")
    assert {w.checksum for w in weights} == {"a638cf028b5870da29e09ccc2f7182e7", "f6a4da60cd5f084d97efc2c1ddb10beb"}
    assert all("script/get-ml-model-resnet50/meta.yaml" in w.source for w in weights)
