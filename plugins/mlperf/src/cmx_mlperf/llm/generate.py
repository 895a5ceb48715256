"""Greedy, streamed generation with transformers for one prompt or a left-padded batch.

A plain decoding loop over the model's forward pass with a KV cache, instead of
``model.generate()``: it calls ``on_token(row, id)`` the moment each token exists (the
first one is LoadGen's TTFT) and costs about half of ``generate()``'s per-token overhead
on a tiny model, which is what a CPU run measures. Greedy argmax gives the same tokens as
``generate(do_sample=False)`` (checked by the tests).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_mlperf.llm.model_dir import load_llama

TokenCallback = Callable[[int, int], None]
"""``callback(row, token_id)`` for a row of the batch."""


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 32
    min_new_tokens: int = 2  # LoadGen's TPOT divides by (n_tokens - 1)
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None


class LlamaGenerator:
    """A loaded Llama model and tokenizer with a streaming, greedy ``generate``."""

    def __init__(self, model_dir: str | Path, settings: GenerationSettings) -> None:
        import torch  # deferred: torch only when this runs (1033 modules)
        from transformers.utils import logging as hf_logging  # deferred: transformers only when this runs (477 modules)


        hf_logging.disable_progress_bar()
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.settings = settings
        self.model, self.tokenizer = load_llama(model_dir, settings.device, settings.dtype)
        self.eos_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self._torch = torch
        params = inspect.signature(self.model.forward).parameters
        # transformers 5.x names the KV cache argument ``cache``; 4.x ``past_key_values``
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

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
        max_new = max_new_tokens or self.settings.max_new_tokens
        min_new = self.settings.min_new_tokens if min_new_tokens is None else min_new_tokens
        device = self.settings.device
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        rows = len(prompts)
        done = torch.zeros(rows, dtype=torch.bool, device=device)
        outputs: list[list[int]] = [[] for _ in range(rows)]
        with torch.inference_mode():
            cache = self._new_cache()
            logits = self._forward(ids, mask, positions, cache)
            for step in range(max_new):
                if step < min_new and self.eos_id is not None:
                    logits[:, self.eos_id] = float("-inf")
                tokens = logits.argmax(-1)
                for row, token in enumerate(tokens.tolist()):
                    if not done[row]:
                        outputs[row].append(token)
                        on_token(row, token)
                done |= tokens == self.eos_id
                if step + 1 == max_new or bool(done.all()):
                    break
                tokens = torch.where(done, torch.full_like(tokens, self.pad_id), tokens)
                mask = torch.cat([mask, (~done).long()[:, None]], dim=1)
                positions = positions[:, -1:] + 1
                logits = self._forward(tokens[:, None], mask, positions, cache)
        return outputs

    def _new_cache(self) -> Any:
        from transformers import DynamicCache  # deferred: transformers only when this runs (477 modules)

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            return DynamicCache()

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        """One forward pass; returns the last position's logits (rows x vocab, float32)."""
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         use_cache=True, logits_to_keep=1, **{self._cache_arg: cache})
        return out.logits[:, -1, :].float()
