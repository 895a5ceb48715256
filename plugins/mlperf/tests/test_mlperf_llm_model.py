"""The tiny local Llama (deterministic build, loadable, greedy loop == generate()), the
model-directory checks (missing, unreadable, wrong architecture) and ROUGE on known strings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import CmxError, UsageError
from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.errors import ModelDirError
from cmx_mlperf.llm.model_dir import check_llama_dir, load_llama
from cmx_mlperf.llm.rouge import rouge_metrics
from cmx_mlperf.llm.tiny_llama import TinyLlamaSpec, build, build_step


def _digests(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


def test_build_is_deterministic_and_seed_dependent(tiny_llama: Path, tmp_path: Path) -> None:
    again = build(tmp_path / "again")
    assert _digests(again) == _digests(tiny_llama)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(_digests(again))
    other = build(tmp_path / "seed1", TinyLlamaSpec(seed=1))
    differing = {k for k, v in _digests(other).items() if _digests(tiny_llama)[k] != v}
    assert "model.safetensors" in differing and "tokenizer.json" not in differing


def test_built_model_loads_as_llama(tiny_llama: Path) -> None:
    info = check_llama_dir(tiny_llama)
    assert info.architecture == "LlamaForCausalLM"
    assert info.config["cmx_model_name"] == "cmx-tiny-llama-h64-l2-v512-s0"
    model, tokenizer = load_llama(tiny_llama)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tokenizer) == 512
    ids = tokenizer(SAMPLES[0].prompt).input_ids
    assert ids[0] == tokenizer.bos_token_id and len(ids) < len(SAMPLES[0].prompt)
    assert tokenizer.decode(ids, skip_special_tokens=True) == SAMPLES[0].prompt


def test_greedy_loop_matches_transformers_generate(tiny_llama: Path) -> None:
    import torch

    from cmx_mlperf.llm.generate import GenerationSettings, LlamaGenerator

    gen = LlamaGenerator(tiny_llama, GenerationSettings(max_new_tokens=12, min_new_tokens=2))
    prompts = [gen.encode(s.prompt) for s in SAMPLES[:5]]
    expected = []
    for ids in prompts:
        with torch.inference_mode():
            out = gen.model.generate(input_ids=torch.tensor([ids]), max_new_tokens=12, min_new_tokens=2,
                                     do_sample=False, pad_token_id=gen.pad_id)
        expected.append(out[0, len(ids):].tolist())
    streamed: list[tuple[int, int]] = []
    batch = gen.generate(prompts, lambda row, token: streamed.append((row, token)))
    assert batch == expected  # left-padded batch == one at a time with generate()
    assert [t for r, t in streamed if r == 3] == expected[3]  # every token streamed, in order


def test_step_builds_into_work_dir_and_refuses_bad_params(cmx_step_context: Any) -> None:
    ctx = cmx_step_context(params={"function": "x:y", "seed": "0", "hidden_size": 32, "num_attention_heads": 4})
    out = build_step(ctx)
    assert Path(out["path"]) == ctx.work_dir / "model"
    assert json.loads((ctx.work_dir / "model" / "config.json").read_text())["hidden_size"] == 32
    with pytest.raises(UsageError, match="unknown parameter 'layers'"):
        TinyLlamaSpec.from_params({"layers": 2})
    with pytest.raises(UsageError, match="hidden_size must be a multiple"):
        TinyLlamaSpec.from_params({"hidden_size": 30})
    with pytest.raises(UsageError, match="seed must be an integer"):
        TinyLlamaSpec.from_params({"seed": "abc"})


# -- bad model directories -------------------------------------------------------------------


def _one_line(exc: pytest.ExceptionInfo[CmxError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, CmxError)
    return text


def test_missing_dir_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError) as exc:
        check_llama_dir(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in _one_line(exc) and "does not exist" in str(exc.value)
    with pytest.raises(ModelDirError, match="not set"):
        check_llama_dir("")


def test_dir_without_or_with_broken_config(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError, match=r"has no config\.json") as exc:
        check_llama_dir(tmp_path)
    _one_line(exc)
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], ')
    with pytest.raises(ModelDirError, match=r"config\.json unreadable") as exc:
        check_llama_dir(tmp_path)
    _one_line(exc)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelDirError, match="not a JSON object"):
        check_llama_dir(tmp_path)


def test_wrong_architecture_names_dir_and_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    with pytest.raises(ModelDirError) as exc:
        check_llama_dir(tmp_path)
    text = _one_line(exc)
    assert str(tmp_path) in text and "GPT2LMHeadModel" in text and "LlamaForCausalLM" in text
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mistral"}))
    with pytest.raises(ModelDirError, match="architecture mistral"):
        check_llama_dir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert check_llama_dir(tmp_path).model_type == "llama"


def test_llama_config_with_unreadable_weights(tiny_llama: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (broken / name).write_bytes((tiny_llama / name).read_bytes())
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelDirError, match="cannot be loaded") as exc:
        load_llama(broken)
    assert str(broken) in _one_line(exc)


# -- ROUGE ------------------------------------------------------------------------------------


def test_rouge_on_known_strings() -> None:
    same = rouge_metrics(["the cat sat on the mat"], ["the cat sat on the mat"], [6])
    assert same["rouge1"] == same["rouge2"] == same["rougeL"] == 100.0
    disjoint = rouge_metrics(["dogs bark loudly"], ["the cat sat"], [3])
    assert disjoint["rouge1"] == disjoint["rouge2"] == disjoint["rougeL"] == 0.0
    # unigrams {the, cat, sat} vs {the, cat, ran}: P = R = 2/3; bigrams 1 of 2 shared
    partial = rouge_metrics(["the cat sat"], ["the cat ran"], [3])
    assert partial["rouge1"] == pytest.approx(66.6667, abs=1e-3)
    assert partial["rouge2"] == pytest.approx(50.0)
    assert partial["rougeL"] == pytest.approx(66.6667, abs=1e-3)


def test_rouge_aggregates_gen_len_and_tokens_per_sample() -> None:
    metrics = rouge_metrics(["the cat sat", ""], ["the cat sat", "a dog"], [4, 2])
    assert metrics["rouge1"] == pytest.approx(50.0)  # mean of 100 and 0
    assert metrics["gen_len"] == 11.0 and metrics["gen_num"] == 2.0
    assert metrics["tokens_per_sample"] == 3.0
    assert rouge_metrics([], [], [])["gen_num"] == 0.0
    with pytest.raises(ValueError):
        rouge_metrics(["a"], [], [1])


def test_dtype_reaches_the_loaded_weights(tiny_llama: Path) -> None:
    import torch

    model, _ = load_llama(tiny_llama, dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    with pytest.raises(ModelDirError, match="dtype 'half_float' is not a torch dtype"):
        load_llama(tiny_llama, dtype="half_float")
