"""LLM accuracy targets (v6.1 checker values, 99 % and 99.9 %) and model/dataset identity
blockers, from the table and through real LoadGen runs of the tiny local Llama."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cmx_mlperf import plugin, targets
from cmx_mlperf.harness.step import run_step

REFERENCE_8B = {"rouge1": 38.7792, "rouge2": 15.9075, "rougeL": 24.4957, "rougeLsum": 35.793,
                "gen_len": 8167644.0}


def test_every_llm_benchmark_has_targets_at_99_and_99_9() -> None:
    for model in ("llama2-70b", "llama3_1-8b", "llama3_1-8b-edge", "llama3_1-405b", "mixtral-8x7b",
                  "gptj", "deepseek-r1", "gpt-oss-120b"):
        for variant, fraction in (("99", 0.99), ("99.9", 0.999)):
            checks = targets.targets(model, variant)
            assert checks, model
            for c in checks:
                ref = targets.BENCHMARKS[model].reference.get(c["metric"])
                if c["metric"] in ("gen_len", "tokens_per_sample"):
                    assert c["maximum"] is not None
                elif ref is not None:
                    assert c["minimum"] == pytest.approx(ref * fraction)
    # the figure: llama3.1-8b ROUGE-1 target 38.39
    assert targets.targets("llama3_1-8b")[0]["minimum"] == pytest.approx(38.39, abs=0.005)


def test_accuracy_at_the_reference_meets_both_variants() -> None:
    result = targets.check_accuracy("llama3_1-8b", REFERENCE_8B)
    assert result is not None and result["checker_version"] == "v6.1"
    assert result["variants"]["99"]["met"] and result["variants"]["99.9"]["met"]
    assert targets.accuracy_blockers("llama3_1-8b", REFERENCE_8B) == []


def test_between_99_and_99_9_meets_only_99() -> None:
    acc = {**REFERENCE_8B, "rouge1": 38.7792 * 0.995}
    result = targets.check_accuracy("llama3_1-8b", acc)
    assert result is not None
    assert result["variants"]["99"]["met"] and not result["variants"]["99.9"]["met"]
    assert targets.accuracy_blockers("llama3_1-8b", acc) == []


def test_low_rouge_missing_metric_and_long_outputs_are_blockers() -> None:
    acc = {"rouge1": 1.87, "rouge2": 15.9075, "rougeL": 24.4957, "gen_len": 8167644 * 1.2}
    blockers = targets.accuracy_blockers("llama3_1-8b", acc)
    assert "accuracy rouge1 1.8700 is below the llama3_1-8b-99 target 38.3914" in blockers
    assert any("rougeLsum was not reported" in b for b in blockers)
    assert any("gen_len" in b and "above the upper limit" in b for b in blockers)
    assert len(blockers) == 3


def test_identity_by_name_digest_parameters_and_dataset() -> None:
    # the right name, size and sample count are not enough: no digest, so nothing is verified
    named = targets.identity_blockers(
        "llama3_1-8b", ["/models/Llama-3.1-8B-Instruct"], 8_030_261_248, None,
        {"name": targets.BENCHMARKS["llama3_1-8b"].dataset}, 13368)
    assert len(named) == 2 and all("named like the reference" in b and "not verified" in b for b in named)
    tiny = targets.identity_blockers("llama3_1-8b", ["tiny-llama"], 139_584, "ab" * 32, None, 36)
    assert any("not the reference weights meta-llama/Llama-3.1-8B-Instruct" in b for b in tiny)
    assert any("139,584 parameters" in b for b in tiny)
    assert any("not the reference dataset" in b for b in tiny)
    assert any("36 samples" in b for b in tiny)
    # a name alone does not make 139,584 parameters the 8B model
    renamed = targets.identity_blockers("llama3_1-8b", ["meta-llama/Llama-3.1-8B-Instruct"], 139_584,
                                        None, None, None)
    assert len(renamed) == 3 and "not verified" in renamed[0] and "parameters" in renamed[1]
    assert targets.identity_blockers("resnet50", [], None, None, None, None) == []


def test_valid_accuracy_run_of_tiny_model_is_flagged(tiny_llama: Path, cmx_home: Path,
                                                     cmx_step_context: Any) -> None:
    """A VALID AccuracyOnly run keeps status valid; the result says it misses the target and
    is not the reference model or dataset."""
    params = {"sut": "hf-llm", "sut_params": {"model_dir": str(tiny_llama), "max_new_tokens": 4,
                                              "batch_size": 8, "total_sample_count": 12},
              "scenario": "Offline", "mode": "AccuracyOnly", "model_name": "llama3.1-8b",
              "min_query_count": 1, "timeout_s": 300}
    part = run_step(cmx_step_context(params=params)).result
    assert part.status == "valid", part.invalid_reasons
    assert part.benchmark["division"] == "unofficial"
    mlperf = part.sections["mlperf"]
    blockers = mlperf["submission_blockers"]
    assert any("rouge1" in b and "below the llama3_1-8b-99 target" in b for b in blockers), blockers
    assert any("not the reference weights" in b for b in blockers)
    assert any("parameters; the reference weights" in b for b in blockers)
    assert any("not the reference dataset" in b for b in blockers)
    assert any("12 samples; the reference dataset has 13368" in b for b in blockers)
    assert mlperf["accuracy_targets"]["variants"]["99"]["met"] is False
    identity = mlperf["identity"]  # docs/models.md: the result records both identities
    assert identity["model"]["verdict"] == targets.OTHER and identity["model"]["reference"] == \
        "meta-llama/Llama-3.1-8B-Instruct"
    assert identity["dataset"]["verdict"] == targets.OTHER
    rouge1 = next(c for c in mlperf["accuracy_targets"]["variants"]["99"]["checks"] if c["metric"] == "rouge1")
    assert rouge1["value"] == mlperf["accuracy"]["rouge1"] and rouge1["met"] is False
    schema = json.loads(plugin.SECTION_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(mlperf)))


def test_noop_llm_performance_run_lists_identity_blockers(cmx_home: Path, cmx_step_context: Any) -> None:
    params = {"sut": "noop", "scenario": "Offline", "model_name": "llama3.1-8b", "duration_s": 0.3,
              "min_query_count": 16, "sut_params": {"tokens_per_sample": 4, "total_sample_count": 16}}
    part = run_step(cmx_step_context(params=params)).result
    blockers = part.sections["mlperf"]["submission_blockers"]
    assert any("model is not the reference weights" in b and "'noop'" in b for b in blockers), blockers
    assert part.sections["mlperf"]["accuracy_targets"] is None  # no accuracy in a performance run


def test_a_directory_named_like_the_reference_with_other_content_is_not_verified(tmp_path: Path) -> None:
    """Identity is by content (docs/models.md): a copy named Llama-3.1-8B-Instruct whose
    manifest digest is not a known digest of the reference is 'named like', never 'reference';
    the same digest listed as the reference's is."""
    import dataclasses
    import hashlib

    fake = tmp_path / "Llama-3.1-8B-Instruct"
    fake.mkdir()
    (fake / "config.json").write_text('{"model_type": "llama"}')
    digest = hashlib.sha256((fake / "config.json").read_bytes()).hexdigest()
    ident = targets.model_identity("llama3_1-8b", [str(fake)], digest)
    assert ident["verdict"] == targets.NAMED_LIKE and ident["digest"] == digest
    blockers = targets.identity_blockers("llama3_1-8b", [str(fake)], None, digest, None, None)
    assert any("not verified" in b and digest in b for b in blockers)
    assert targets.model_identity("llama3_1-8b", ["my-model"], digest)["verdict"] == targets.OTHER
    known = dataclasses.replace(targets.BENCHMARKS["llama3_1-8b"], digests=frozenset({digest}))
    original = targets.BENCHMARKS["llama3_1-8b"]
    targets.BENCHMARKS["llama3_1-8b"] = known
    try:
        assert targets.model_identity("llama3_1-8b", ["any-name"], digest)["verdict"] == targets.REFERENCE
        assert not any("weights" in b for b in targets.identity_blockers("llama3_1-8b", ["x"], None, digest,
                                                                         None, None))
    finally:
        targets.BENCHMARKS["llama3_1-8b"] = original


def test_a_dataset_is_reference_only_by_digest() -> None:
    name = targets.BENCHMARKS["llama3_1-8b"].dataset
    assert targets.dataset_identity("llama3_1-8b", {"name": name, "sha256": "ab" * 32})["verdict"] == targets.NAMED_LIKE
    assert targets.dataset_identity("llama3_1-8b", {"name": "mine"})["verdict"] == targets.OTHER
    assert targets.dataset_identity("resnet50", {"name": "x"})["verdict"] == targets.UNKNOWN
