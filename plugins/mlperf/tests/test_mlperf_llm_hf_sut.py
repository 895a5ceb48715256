"""The hf-llm SUT: driven directly (a recording completer stands in for LoadGen's callback)
and through the real harness and LoadGen (token latencies, ROUGE in AccuracyOnly)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_mlperf.harness.step import run_step
from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.errors import ModelDirError, SampleErrors
from cmx_mlperf.llm.hf_sut import make
from cmx_mlperf.llm.testing import RecordingCompleter
from cmx_mlperf.llm.tokens import ids_from_bytes
from cmx_mlperf.sut import AccuracyEntry, make_sut


@pytest.mark.parametrize("batch_size", [1, 4])
def test_streams_first_token_then_completes_every_id_once(tiny_llama: Path, batch_size: int) -> None:
    sut = make_sut("hf-llm", {"model_dir": str(tiny_llama), "max_new_tokens": 6, "batch_size": batch_size})
    assert sut.uses_tokens and sut.total_sample_count == len(SAMPLES)
    rec = RecordingCompleter(expected=10)
    sut.start(rec)
    try:
        sut.issue(list(range(100, 110)), [0, 1, 2, 3, 4, 5, 6, 7, 8, 40])  # 40 wraps to 4
        assert rec.wait(120), "not every sample was completed"
    finally:
        sut.stop()
    assert rec.order_problems() == []
    done = rec.completions()
    assert sorted(done) == list(range(100, 110))
    firsts = {c.response_id: c.data for c in rec.calls if c.kind == "first"}
    for rid, call in done.items():
        ids = ids_from_bytes(call.data)
        assert call.n_tokens == len(ids) and 2 <= len(ids) <= 6
        assert ids_from_bytes(firsts[rid]) == ids[:1]
    assert done[109].data == done[104].data  # same prompt, greedy: same output
    assert sut.errors() == []
    assert sut.model_info["architecture"] == "LlamaForCausalLM"
    assert sut.model_info["number_of_parameters"] > 10_000


def test_accuracy_decodes_token_ids_against_references(tiny_llama: Path) -> None:
    sut = make({"model_dir": str(tiny_llama), "max_new_tokens": 8})
    rec = RecordingCompleter(expected=3)
    sut.start(rec)
    try:
        sut.issue([0, 1, 2], [0, 1, 2])
        assert rec.wait(120)
        tokenizer = sut._generator.tokenizer
        good = tokenizer(" " + SAMPLES[5].reference, add_special_tokens=False).input_ids
    finally:
        sut.stop()
    entries = [AccuracyEntry(i, c.data) for i, c in sorted(rec.completions().items())]
    metrics = sut.accuracy(entries)
    assert set(metrics) >= {"rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "tokens_per_sample"}
    assert metrics["gen_num"] == 3 and 2 <= metrics["tokens_per_sample"] <= 8
    from cmx_mlperf.llm.tokens import ids_to_bytes

    perfect = sut.accuracy([AccuracyEntry(5, ids_to_bytes(good))])  # the reference itself
    assert perfect["rouge1"] == perfect["rougeL"] == 100.0
    assert perfect["tokens_per_sample"] == len(good)


@pytest.mark.parametrize("fail_on_errors", [False, True])
def test_generation_failure_still_completes_and_is_reported(
    tiny_llama: Path, monkeypatch: Any, fail_on_errors: bool
) -> None:
    params: dict[str, Any] = {"model_dir": str(tiny_llama), "max_new_tokens": 4, "batch_size": 2}
    if fail_on_errors:
        params["fail_on_errors"] = True
    sut = make(params)
    rec = RecordingCompleter(expected=3)
    sut.start(rec)

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:  # what a GPU OOM looks like
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(sut._generator, "generate", out_of_memory)
    sut.issue([1, 2, 3], [0, 1, 2])
    assert rec.wait(60) and rec.order_problems() == []
    assert all(c.data == b"" and c.n_tokens == 0 for c in rec.completions().values())
    assert sut.accuracy([AccuracyEntry(i, c.data) for i, c in rec.completions().items()])["errors"] == 3
    reason = "3 of 3 samples: generation failed: RuntimeError: CUDA out of memory"
    if fail_on_errors:
        with pytest.raises(SampleErrors, match=reason):
            sut.stop()
    else:
        sut.stop()  # the default: the harness reads errors() after the test
    assert sut.error_count == 3 and sut.errors()[0].startswith(reason)


def test_bad_params_and_model_dirs(tiny_llama: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown sut_params key 'model'"):
        make({"model": str(tiny_llama)})
    with pytest.raises(UsageError, match="model_dir"):
        make({})
    with pytest.raises(UsageError, match="max_new_tokens must be int"):
        make({"model_dir": str(tiny_llama), "max_new_tokens": "many"})
    with pytest.raises(ModelDirError, match="does not exist"):
        make({"model_dir": str(tmp_path / "missing")})
    (tmp_path / "config.json").write_text('{"architectures": ["BertForMaskedLM"]}')
    with pytest.raises(ModelDirError, match="BertForMaskedLM"):
        make({"model_dir": str(tmp_path)})


# -- through the harness and real LoadGen --------------------------------------------------


def test_server_run_through_loadgen_reports_token_latencies(
    tiny_llama: Path, cmx_home: Path, cmx_step_context: Any
) -> None:
    params = {"sut": "hf-llm", "sut_params": {"model_dir": str(tiny_llama), "max_new_tokens": 8, "batch_size": 4},
              "scenario": "Server", "model_name": "llama3.1-8b", "duration_s": 1, "target_qps": 20,
              "min_query_count": 1, "timeout_s": 300}
    out = run_step(cmx_step_context(params=params))
    part = out.result
    assert part.status in ("valid", "invalid")  # LoadGen's own verdict either way
    metrics = part.metrics
    assert metrics["tokens_per_second"].value > 0 and metrics["tokens_per_second"].unit == "tokens/s"
    assert metrics["ttft_p99_ns"].value > 0 and metrics["tpot_p99_ns"].value > 0
    assert metrics["ttft_p99_ns"].value < metrics["latency_p99_ns"].value
    assert part.sections["mlperf"]["effective"]["use_token_latencies"] is True
    assert part.sections["model"]["architecture"] == "LlamaForCausalLM"
    assert any("600000 ms" in b for b in part.sections["mlperf"]["submission_blockers"])


def test_accuracy_only_run_scores_rouge(tiny_llama: Path, cmx_home: Path, cmx_step_context: Any) -> None:
    params = {"sut": "hf-llm", "sut_params": {"model_dir": str(tiny_llama), "max_new_tokens": 4,
                                              "batch_size": 8, "total_sample_count": 12},
              "scenario": "Offline", "mode": "AccuracyOnly", "model_name": "llama3.1-8b",
              "duration_s": 1, "expected_qps": 10, "min_query_count": 1, "timeout_s": 300}
    out = run_step(cmx_step_context(params=params))
    accuracy = out.result.sections["mlperf"]["accuracy"]
    assert accuracy["gen_num"] == 12.0  # every QSL sample once
    assert 2 <= accuracy["tokens_per_sample"] <= 4
    assert 0.0 <= accuracy["rouge1"] <= 100.0
    assert "accuracy_rouge1" in out.result.metrics
    assert (Path(out.outputs["log_dir"]) / "accuracy.txt").is_file()
