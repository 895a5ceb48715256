"""Inter-token latency on the openai-http path: per-chunk gaps pooled over requests (vLLM's
convention), measured against the real loopback server; failed requests add no gaps; the
summary reaches the result through the SUT's extra_results() and the real LoadGen harness,
together with the model, dataset and serving-engine facts the SUT records."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_core.testing import result_part_problems
from cmx_mlperf import __version__
from cmx_mlperf.harness.step import run_step
from cmx_mlperf.llm.describe import DATASET_NAME, cuda_from_version_py
from cmx_mlperf.llm.http_sut import OpenAIHttpSUT, make
from cmx_mlperf.llm.itl import ItlPool, gaps_ns, summarize
from cmx_mlperf.llm.model_dir import weights_digest
from cmx_mlperf.llm.test_server import Fault, LoopbackServer, StreamShape
from cmx_mlperf.llm.testing import RecordingCompleter


@pytest.fixture(scope="module")
def chunky(tiny_llama: Path) -> Iterator[LoopbackServer]:
    """No usage, 3 tokens per chunk, the model served under its directory's path (as
    ``vllm serve /models/llama`` does), so the SUT finds the weights without model_dir."""
    shape = StreamShape(usage=False, tokens_per_chunk=3)
    with LoopbackServer(tiny_llama, model_name=str(tiny_llama), shape=shape) as srv:
        yield srv


def _run(sut: OpenAIHttpSUT, n: int) -> RecordingCompleter:
    rec = RecordingCompleter(expected=n)
    sut.start(rec)
    try:
        sut.issue(list(range(n)), list(range(n)))
        assert rec.wait(120), "a sample was never completed"
    finally:
        sut.stop()
    assert rec.order_problems() == []
    return rec


def test_gaps_and_percentiles() -> None:
    assert gaps_ns([10, 15, 35, 36]) == [5, 20, 1] and gaps_ns([7]) == []
    summary = summarize(list(range(1, 101)))  # linear interpolation, as numpy.percentile and vLLM
    assert summary["min"] == 1 and summary["max"] == 100 and summary["mean"] == 50.5
    assert summary["p50"] == pytest.approx(50.5) and summary["p90"] == pytest.approx(90.1)
    assert summary["p99"] == pytest.approx(99.01) and summary["p99_9"] == pytest.approx(99.901)
    assert set(summarize([]).values()) == {None}
    pool = ItlPool()
    pool.add([0, 10, 30])
    pool.add([100])  # one chunk: no gap
    pool.add([5, 6])
    extra = pool.extra()
    assert pool.gap_count == 3 and extra["mlperf"]["itl_ns"]["max"] == 20 and extra["mlperf"]["itl_requests"] == 3
    assert extra["metrics"]["itl_p50_ns"] == {"value": 10.0, "unit": "ns", "higher_is_better": False}
    assert set(extra["metrics"]) == {"itl_mean_ns", "itl_p50_ns", "itl_p90_ns", "itl_p99_ns"}


def test_one_gap_per_token_chunk(server: LoopbackServer) -> None:
    sut = make({"base_url": server.url, "max_tokens": 6, "min_tokens": 6, "concurrency": 2})
    _run(sut, 4)
    mlperf = sut.extra_results()["mlperf"]
    assert mlperf["itl_requests"] == 4
    assert mlperf["itl_gaps"] >= 4 * 5  # 6 one-token chunks: 5 gaps each (+1 where text was held back)
    itl = mlperf["itl_ns"]
    assert 0 < itl["min"] <= itl["p50"] <= itl["p90"] <= itl["p99"] <= itl["max"]


def test_multi_token_chunks_give_one_gap_each(chunky: LoopbackServer) -> None:
    sut = make({"base_url": chunky.url, "max_tokens": 9, "min_tokens": 9, "concurrency": 2})
    _run(sut, 4)
    mlperf = sut.extra_results()["mlperf"]
    assert 4 * 2 <= mlperf["itl_gaps"] <= 4 * 3  # 3 chunks of 3 tokens: 2 gaps, not 8


def test_failed_requests_add_no_gaps(faulty: LoopbackServer) -> None:
    sut = make({"base_url": faulty.url, "max_tokens": 6, "min_tokens": 6, "concurrency": 1})
    sut.start(RecordingCompleter())
    sut.stop()
    faulty.set_fault(Fault("drop", every=2))  # drops after the 2nd token chunk: gaps that must not count
    _run(sut, 4)
    assert sut.error_count == 2
    assert sut.extra_results()["mlperf"]["itl_requests"] == 2


def test_model_dataset_and_engine_are_recorded(chunky: LoopbackServer, tiny_llama: Path) -> None:
    from cmx_mlperf.llm.model_dir import load_llama

    sut = make({"base_url": chunky.url, "max_tokens": 4})
    _run(sut, 2)
    info = sut.model_info
    assert info is not None and info["source"] == str(tiny_llama) == info["served_name"]
    digest = weights_digest(tiny_llama)
    assert digest is not None and info["sha256"] == digest.sha256 and len(info["sha256"]) == 64
    assert info["weight_files"] == digest.files and list(digest.files) == ["model.safetensors"]
    file_sha = hashlib.sha256((tiny_llama / "model.safetensors").read_bytes()).hexdigest()
    assert digest.files["model.safetensors"] == file_sha  # the documented listing, hashed once more
    assert digest.sha256 == hashlib.sha256(f"{file_sha}  model.safetensors\n".encode()).hexdigest()
    model, _ = load_llama(tiny_llama)
    assert info["number_of_parameters"] == sum(p.numel() for p in model.parameters())
    assert info["weight_data_types"] == "fp32" and info["architecture"] == "LlamaForCausalLM"
    assert sut.model_name == info["name"] and info["name"].startswith("cmx-tiny-llama")
    assert sut.dataset_info["name"] == DATASET_NAME
    extra = sut.extra_results()
    assert extra["packages"]["cmx-loopback-test-server"] == __version__  # GET /version, owned_by
    assert extra["mlperf"]["serving"]["engine"] == "cmx-loopback-test-server"
    assert extra["mlperf"]["token_count_source"] == "token_ids"  # return_token_ids by default


def test_a_served_name_that_is_not_a_directory_records_nulls(server: LoopbackServer) -> None:
    sut = make({"base_url": server.url, "max_tokens": 3})
    _run(sut, 1)
    info = sut.model_info
    assert info is not None and info["name"] == "tiny-llama"
    assert info["sha256"] is None and info["weight_data_types"] is None and info["unknown_reason"]


def test_cuda_version_is_read_from_torch_version_py(tmp_path: Path) -> None:
    cuda_build = tmp_path / "cuda.py"  # as torch 2.x writes torch/version.py for a CUDA build
    cuda_build.write_text("__version__ = '2.8.0+cu128'\ncuda: Optional[str] = '12.8'\nhip = None\n")
    cpu_build = tmp_path / "cpu.py"
    cpu_build.write_text("__version__ = '2.8.0+cpu'\ncuda: Optional[str] = None\n")
    old_style = tmp_path / "old.py"
    old_style.write_text("cuda = '11.8'\n")
    assert cuda_from_version_py(cuda_build) == "12.8" and cuda_from_version_py(old_style) == "11.8"
    assert cuda_from_version_py(cpu_build) is None and cuda_from_version_py(tmp_path / "none.py") is None


def test_bad_model_dir_is_a_usage_error(tmp_path: Path) -> None:
    from cmx_core.errors import UsageError

    with pytest.raises(UsageError, match=r"sut_params.model_dir .* is not a directory"):
        make({"base_url": "http://127.0.0.1:1", "model_dir": str(tmp_path / "missing")})


def test_itl_and_counts_reach_the_result(
    chunky: LoopbackServer, tiny_llama: Path, cmx_home: Path, cmx_step_context: Any
) -> None:
    sut_params = {"base_url": chunky.url, "max_tokens": 6, "concurrency": 8, "return_token_ids": False}
    params = {"sut": "openai-http", "sut_params": sut_params, "scenario": "Server", "model_name": "llama3.1-8b",
              "duration_s": 1, "target_qps": 10, "min_query_count": 1, "timeout_s": 300}
    out = run_step(cmx_step_context(params=params))
    part = out.result
    assert part is not None
    mlperf = part.sections["mlperf"]
    assert part.metrics["itl_p50_ns"].unit == "ns" and part.metrics["itl_p50_ns"].higher_is_better is False
    p50, p99 = part.metrics["itl_p50_ns"].value, part.metrics["itl_p99_ns"].value
    assert p50 is not None and p99 is not None and 0 < p50 <= p99
    assert mlperf["itl_ns"]["p90"] == part.metrics["itl_p90_ns"].value
    assert mlperf["token_count_source"] == "tokenizer"  # no usage, no ids: the served dir's tokenizer
    assert any("re-encoding the text" in w for w in mlperf["warnings"])
    digest = weights_digest(tiny_llama)
    assert digest is not None and part.sections["model"]["sha256"] == digest.sha256
    assert part.sections["software"]["packages"]["cmx-loopback-test-server"] == __version__
    assert result_part_problems("mlperf.loadgen", out) == []

