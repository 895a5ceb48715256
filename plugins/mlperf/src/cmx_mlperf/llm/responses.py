"""The bytes an HTTP SUT hands to LoadGen's completer, and how they are read back.

MLPerf's LLM reference SUTs send the generated token ids as little-endian int32
(:func:`~cmx_mlperf.llm.tokens.ids_to_bytes`) and the reference accuracy script decodes them
with the model's tokenizer, so ``mlperf_log_accuracy.json`` must hold ids. The ids come from
the server when it returned them (``token_ids``), else from re-encoding the text with the
local tokenizer. Only when neither exists is the entry UTF-8 JSON ``{"text": ..., "n_tokens":
N}`` (the SUT warns: the reference script cannot read it). Server ids without a local
tokenizer are logged as ids too; the SUT then keeps each one's text in memory, so its own
``accuracy()`` (run in the same process, after the test) can still score them.

A failed sample is completed with **empty bytes** (zero ids), as the ``hf-llm`` SUT does. A
successful sample always has at least one id: a completion whose text is empty (the model
stopped at once) is logged as the tokenizer's EOS id, the token the server generated.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from cmx_mlperf.llm.openai_client import StreamResult
from cmx_mlperf.llm.tokens import ids_from_bytes, ids_to_bytes

FAILED = b""
"""The response bytes of a failed sample."""


@dataclass(frozen=True)
class Encoded:
    """One successful sample: the response bytes, LoadGen's ``n_tokens``, where the count
    came from (:mod:`~cmx_mlperf.llm.token_counts`) and how the bytes were made
    (``server_ids``, ``tokenizer_ids`` or ``json``)."""

    data: bytes
    n_tokens: int
    count_source: str
    encoding: str


class ResponseCodec:
    """Encodes stream results into response bytes with an optional tokenizer (thread-safe)."""

    def __init__(self, tokenizer: Any | None) -> None:
        self.tokenizer = tokenizer
        self._lock = threading.Lock()  # a fast tokenizer refuses concurrent use of one instance
        self._texts: dict[bytes, str] = {}  # server ids -> text, kept only without a tokenizer

    def encode_text(self, text: str) -> list[int]:
        assert self.tokenizer is not None
        with self._lock:
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return ids if ids or eos is None else [int(eos)]

    def encode(self, result: StreamResult) -> Encoded:
        retokenized: list[int] | None = None
        if result.token_ids:
            ids: list[int] | None = list(result.token_ids)
            encoding = "server_ids"
        elif self.tokenizer is not None:
            ids = retokenized = self.encode_text(result.text)
            encoding = "tokenizer_ids"
        else:
            ids, encoding = None, "json"
        n_tokens, source = count_tokens(result, retokenized)
        fallback = {"text": result.text, "n_tokens": n_tokens}
        data = ids_to_bytes(ids) if ids is not None else json.dumps(fallback).encode()
        if encoding == "server_ids" and self.tokenizer is None:
            with self._lock:
                self._texts[data] = result.text
        return Encoded(data, n_tokens, source, encoding)

    def decode(self, data: bytes) -> list[int] | str | None:
        """Ids (a tokenizer can turn them into text), the JSON fallback's text, or None for a
        failed or unreadable entry."""
        if not data:
            return None
        if self.tokenizer is not None:
            return ids_from_bytes(data) if len(data) % 4 == 0 else None
        with self._lock:
            text = self._texts.get(data)
        if text is not None:
            return text
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        return str(obj["text"]) if isinstance(obj, dict) and "text" in obj else None


def count_tokens(result: StreamResult, retokenized: list[int] | None) -> tuple[int, str]:
    """LoadGen's ``n_tokens`` and its source: usage, then server ids, then the tokenizer,
    then the chunk count."""
    if result.usage_tokens is not None:
        return result.usage_tokens, "usage"
    if result.token_ids:
        return len(result.token_ids), "token_ids"
    if retokenized is not None:
        return len(retokenized), "tokenizer"
    return result.chunks, "chunks"
