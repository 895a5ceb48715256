"""Build a tiny Llama locally: random weights (fixed seed) and a BPE tokenizer trained here.

Nothing is downloaded: the tokenizer is trained with the ``tokenizers`` library on the
built-in text set (:mod:`cmx_mlperf.llm.dataset`), the model is a ``LlamaForCausalLM`` with a
small config initialised from ``torch.manual_seed(seed)``. Both are saved with
``save_pretrained`` so the directory loads like any Hugging Face Llama checkpoint. The same
spec on the same software versions gives byte-identical files.

Recipe use (``get-tiny-llama``): the built-in ``python`` step calls :func:`build_step`, which
writes into the step's work dir (a cache entry) and returns ``{"path": ...}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from cmx_mlperf.llm.dataset import corpus_lines
from cmx_mlperf.llm.errors import UsageError
from cmx_mlperf.llm.model_dir import NAME_KEY

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")


@dataclass(frozen=True)
class TinyLlamaSpec:
    """The knobs of the tiny model; defaults keep CPU generation at ~1 ms per token."""

    seed: int = 0
    vocab_size: int = 512
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 512

    @property
    def name(self) -> str:
        return f"cmx-tiny-llama-h{self.hidden_size}-l{self.num_hidden_layers}-v{self.vocab_size}-s{self.seed}"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str = "get-tiny-llama") -> TinyLlamaSpec:
        """Build a spec from step params (unknown keys and non-integers are refused)."""
        known = {f.name for f in fields(cls)}
        values: dict[str, int] = {}
        for key, value in params.items():
            if key == "function":
                continue
            if key not in known:
                raise UsageError(f"{where}: unknown parameter {key!r}; known: {', '.join(sorted(known))}")
            try:
                values[key] = int(value)
            except (TypeError, ValueError):
                raise UsageError(f"{where}: parameter {key} must be an integer, got {value!r}") from None
        spec = cls(**values)
        spec.check(where)
        return spec

    def check(self, where: str) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise UsageError(f"{where}: hidden_size must be a multiple of num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise UsageError(f"{where}: num_attention_heads must be a multiple of num_key_value_heads")
        if self.vocab_size < 300:
            raise UsageError(f"{where}: vocab_size must be at least 300 (256 bytes + merges + specials)")


def train_tokenizer(vocab_size: int, lines: list[str]) -> Any:
    """A byte-level BPE tokenizer trained on ``lines``, wrapped as a fast HF tokenizer."""
    # deferred: tokenizers only when this runs (14 modules)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast  # deferred: transformers only when this runs (477 modules)

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        padding_side="left",
        model_max_length=512,
    )


def build_model(spec: TinyLlamaSpec, tokenizer: Any) -> Any:
    """A ``LlamaForCausalLM`` with random weights drawn from ``spec.seed``."""
    import torch  # deferred: torch only when this runs (1033 modules)

    # deferred: transformers only when this runs (477 modules)
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM


    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    setattr(config, NAME_KEY, spec.name)
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    return model.eval()


def build(dest: Path, spec: TinyLlamaSpec | None = None) -> Path:
    """Write the tiny model and its tokenizer into ``dest`` (created) and return it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging  # deferred: transformers only when this runs (477 modules)

    hf_logging.disable_progress_bar()
    spec = spec or TinyLlamaSpec()
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(spec.vocab_size, corpus_lines())
    model = build_model(spec, tokenizer)
    tokenizer.save_pretrained(str(dest))
    model.save_pretrained(str(dest))
    return dest


def build_step(ctx: Any) -> dict[str, Any]:
    """Entry point of the ``get-tiny-llama`` recipe (built-in ``python`` step)."""
    spec = TinyLlamaSpec.from_params(ctx.params)
    path = build(Path(ctx.work_dir) / "model", spec)
    return {"path": str(path)}
