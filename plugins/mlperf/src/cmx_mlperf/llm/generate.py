"""Greedy, streamed generation with transformers for one prompt or a left-padded batch.

``generate()`` pushes each decoding step's new tokens to a streamer; :class:`_StepStreamer`
turns those pushes into per-row callbacks, so a caller learns each row's first token the
moment it exists (TTFT) and, for the loopback server, every later token too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TokenCallback = Callable[[int, int], None]
"""``callback(row, token_id)`` for a row of the batch."""


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 32
    min_new_tokens: int = 2  # LoadGen's TPOT divides by (n_tokens - 1)
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None


class _StepStreamer:
    """Receives ``generate()``'s pushes: first the prompt, then one token per row per step.

    Calls ``on_token(row, id)`` for each row that is still generating; a row stops after
    its EOS (later pushes for it are padding).
    """

    def __init__(self, rows: int, eos_id: int | None, on_token: TokenCallback) -> None:
        self._rows = rows
        self._eos = eos_id
        self._on_token = on_token
        self._seen_prompt = False
        self._done = [False] * rows

    def put(self, value: Any) -> None:
        if not self._seen_prompt:
            self._seen_prompt = True
            return
        tokens = value.reshape(-1).tolist()
        for row, token in enumerate(tokens[: self._rows]):
            if self._done[row]:
                continue
            self._on_token(row, int(token))
            if token == self._eos:
                self._done[row] = True

    def end(self) -> None:
        return None


class LlamaGenerator:
    """A loaded Llama model and tokenizer with a streaming, greedy ``generate``."""

    def __init__(self, model_dir: str | Path, settings: GenerationSettings) -> None:
        import torch
        from transformers.generation.streamers import BaseStreamer
        from transformers.utils import logging as hf_logging

        from cmx_mlperf.llm.model_dir import load_llama

        hf_logging.disable_progress_bar()
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.settings = settings
        self.model, self.tokenizer = load_llama(model_dir, settings.device, settings.dtype)
        self.eos_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self._torch = torch
        # generate() checks isinstance(streamer, BaseStreamer)
        self._streamer_cls = type("StepStreamer", (_StepStreamer, BaseStreamer), {})

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text).input_ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        on_token: TokenCallback,
        max_new_tokens: int | None = None,
        min_new_tokens: int | None = None,
    ) -> list[list[int]]:
        """Generate for a batch of tokenized prompts; returns each row's new ids up to and
        including its EOS (no padding)."""
        torch = self._torch
        width = max(len(p) for p in prompts)
        ids = [[self.pad_id] * (width - len(p)) + list(p) for p in prompts]
        mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts]
        input_ids = torch.tensor(ids, dtype=torch.long, device=self.settings.device)
        attention = torch.tensor(mask, dtype=torch.long, device=self.settings.device)
        streamer = self._streamer_cls(len(prompts), self.eos_id, on_token)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=max_new_tokens or self.settings.max_new_tokens,
                min_new_tokens=self.settings.min_new_tokens if min_new_tokens is None else min_new_tokens,
                do_sample=False,
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_id,
                streamer=streamer,
            )
        return [self._trim(row[width:].tolist()) for row in out]

    def _trim(self, ids: list[int]) -> list[int]:
        if self.eos_id in ids:
            return ids[: ids.index(self.eos_id) + 1]
        return ids
