"""Honest token counts and token ids on the openai-http path, against the real loopback
server serving the tiny Llama: a server that sends no usage and streams 3 tokens per chunk
(as vLLM may) reproduces the chunk-count error for real (9 tokens counted as 3); usage, the
server's token ids and the local tokenizer correct it, and each source is labelled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_mlperf.llm.http_sut import OpenAIHttpSUT, make
from cmx_mlperf.llm.openai_client import StreamResult
from cmx_mlperf.llm.responses import ResponseCodec, count_tokens
from cmx_mlperf.llm.test_server import LoopbackServer, StreamShape
from cmx_mlperf.llm.testing import RecordingCompleter
from cmx_mlperf.llm.token_counts import TokenCountTally
from cmx_mlperf.llm.tokens import ids_from_bytes
from cmx_mlperf.sut import AccuracyEntry

TOKENS = 9  # min_tokens = max_tokens: every completion has exactly 9 tokens
PER_CHUNK = 3


@pytest.fixture(scope="module")
def bare(tiny_llama: Path) -> Iterator[LoopbackServer]:
    """A server that never sends usage and streams 3 tokens per chunk."""
    with LoopbackServer(tiny_llama, shape=StreamShape(usage=False, tokens_per_chunk=PER_CHUNK)) as srv:
        yield srv


def _run(sut: OpenAIHttpSUT, n: int = 6) -> RecordingCompleter:
    rec = RecordingCompleter(expected=n)
    sut.start(rec)
    try:
        sut.issue(list(range(n)), list(range(n)))
        assert rec.wait(120), "a sample was never completed"
    finally:
        sut.stop()
    assert rec.order_problems() == [] and sut.errors() == []
    return rec


def _sut(url: str, **params: Any) -> OpenAIHttpSUT:
    return make({"base_url": url, "max_tokens": TOKENS, "min_tokens": TOKENS, "concurrency": 2,
                 "return_token_ids": False, **params})


def test_chunk_counts_are_wrong_and_say_so(bare: LoopbackServer) -> None:
    sut = _sut(bare.url)
    rec = _run(sut)
    counts = [c.n_tokens for c in rec.completions().values()]
    assert all(c is not None and c < TOKENS for c in counts), counts  # 9 tokens, about 3 chunks each
    extra = sut.extra_results()
    assert extra["mlperf"]["token_count_source"] == "chunks"
    assert extra["mlperf"]["token_count_samples"] == {"chunks": 6}
    chunk_total = sum(c or 0 for c in counts)
    assert (f"openai-http: 6 of 6 samples had no usage; token counts were estimated from {chunk_total} "
            "stream chunks") in extra["warnings"][0]
    # no tokenizer, no server ids: the accuracy log falls back to JSON text, with a warning
    assert extra["mlperf"]["accuracy_log_encoding"] == {"json": 6}
    assert "logged as JSON text, not int32 token ids" in extra["warnings"][1]
    first = json.loads(rec.completions()[0].data)
    assert first["n_tokens"] == counts[0] and first["text"]
    metrics = sut.accuracy([AccuracyEntry(i, c.data) for i, c in rec.completions().items()])
    assert metrics["errors"] == 0 and metrics["gen_num"] == 6


def test_server_token_ids_correct_the_count(bare: LoopbackServer) -> None:
    sut = _sut(bare.url, return_token_ids=True)
    rec = _run(sut)
    for call in rec.completions().values():
        assert call.n_tokens == len(ids_from_bytes(call.data)) == TOKENS
    extra = sut.extra_results()
    assert extra["mlperf"]["token_count_source"] == "token_ids" and extra["warnings"] == []
    assert extra["mlperf"]["accuracy_log_encoding"] == {"server_ids": 6}
    metrics = sut.accuracy([AccuracyEntry(i, c.data) for i, c in rec.completions().items()])
    assert metrics["errors"] == 0 and metrics["tokens_per_sample"] == TOKENS  # texts kept in memory


def test_usage_corrects_the_count(tiny_llama: Path) -> None:
    with LoopbackServer(tiny_llama, shape=StreamShape(usage=True, tokens_per_chunk=PER_CHUNK)) as srv:
        sut = _sut(srv.url, model_dir=str(tiny_llama))
        rec = _run(sut)
    assert {c.n_tokens for c in rec.completions().values()} == {TOKENS}
    extra = sut.extra_results()
    assert extra["mlperf"]["token_count_source"] == "usage" and extra["warnings"] == []
    assert extra["mlperf"]["accuracy_log_encoding"] == {"tokenizer_ids": 6}


def test_tokenizer_counts_re_encode_the_text(bare: LoopbackServer, tiny_llama: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama), local_files_only=True)
    sut = _sut(bare.url, model_dir=str(tiny_llama))
    rec = _run(sut)
    for call in rec.completions().values():
        ids = ids_from_bytes(call.data)
        assert call.n_tokens == len(ids) > 0
        text = tokenizer.decode(ids, skip_special_tokens=True)
        assert ids == tokenizer.encode(text, add_special_tokens=False)  # re-encoded, not chunk-counted
    extra = sut.extra_results()
    assert extra["mlperf"]["token_count_source"] == "tokenizer"
    assert extra["mlperf"]["accuracy_log_encoding"] == {"tokenizer_ids": 6}
    assert any("re-encoding the text with the local tokenizer" in w for w in extra["warnings"])
    assert not any("stream chunks" in w for w in extra["warnings"])


def test_server_process_flags_shape_the_stream(tiny_llama: Path) -> None:
    import socket
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    cmd = [sys.executable, "-m", "cmx_mlperf.llm.test_server", "--model-dir", str(tiny_llama), "--port", str(port),
           "--no-usage", "--tokens-per-chunk", "3", "--max-seconds", "300"]
    sut = _sut(f"http://127.0.0.1:{port}", launch=cmd, ready_timeout_s=120)
    rec = _run(sut, 2)
    assert all((c.n_tokens or 0) < TOKENS for c in rec.completions().values())  # 3 tokens per chunk
    assert sut.extra_results()["mlperf"]["token_count_source"] == "chunks"  # no usage chunk


def test_count_sources_in_order_of_trust() -> None:
    def result(usage: int | None, ids: tuple[int, ...] | None) -> StreamResult:
        return StreamResult("abc", 2, usage, ids, (1, 2), "length")

    assert count_tokens(result(7, (1, 2, 3)), [1]) == (7, "usage")
    assert count_tokens(result(None, (1, 2, 3)), [1]) == (3, "token_ids")
    assert count_tokens(result(None, None), [1, 2, 3, 4]) == (4, "tokenizer")
    assert count_tokens(result(None, None), None) == (2, "chunks")


def test_mixed_sources_are_counted() -> None:
    tally = TokenCountTally("openai-http")
    assert tally.source() is None and tally.warnings() == []
    for _ in range(37):
        tally.add("usage")
    for _ in range(3):
        tally.add("chunks", chunks=4)
    assert tally.source() == "mixed (usage: 37, chunks: 3)"
    assert tally.warnings() == [
        "openai-http: 3 of 40 samples had no usage; token counts were estimated from 12 stream chunks, so "
        "TPOT and tokens/s may be wrong (a chunk may carry several tokens): set model_dir to count with "
        "the tokenizer"]
    with pytest.raises(ValueError, match="not one of"):
        tally.add("guess")


def test_failed_and_empty_samples_cannot_be_confused(tiny_llama: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama), local_files_only=True)
    codec = ResponseCodec(tokenizer)
    empty = codec.encode(StreamResult("", 1, 1, None, (5,), "stop"))  # the model stopped at once
    assert ids_from_bytes(empty.data) == [tokenizer.eos_token_id] and empty.n_tokens == 1
    assert codec.decode(empty.data) == [tokenizer.eos_token_id]
    assert codec.decode(b"") is None  # the failure mark
    assert codec.decode(b"abc") is None  # not int32 ids
