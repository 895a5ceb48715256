"""vLLM's tensor/data parallel choice (cmx_mlperf.llm.vllm_plan) and the llama recipe's
use of it through the template function mlperf_vllm_split over recorded GPU facts (what
`cmx plan` shows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import CmxError, UsageError
from cmx_mlperf.llm import vllm_plan

REPO = Path(__file__).resolve().parents[3]
FACTS = REPO / "examples" / "facts"
H100_MEM = 85520809984  # examples/facts/h100-sxm-8x.json, per GPU
H200_MEM = 150754820096  # examples/facts/h200-1x.json
LLAMA31_8B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}


def _tpdp(split: vllm_plan.Parallelism) -> tuple[int, int]:
    return split.tensor_parallel, split.data_parallel


def test_llama31_8b_parameter_count_from_its_config() -> None:
    assert vllm_plan.llama_parameters(LLAMA31_8B) == 8_030_261_248
    assert vllm_plan.llama_parameters(LLAMA31_8B) * 2 / 1e9 == pytest.approx(vllm_plan.LLAMA31_8B_GB, abs=0.005)


def test_weights_bytes_prefer_the_safetensors_index(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA31_8B))
    assert vllm_plan.weights_bytes_from_dir(tmp_path) == 8_030_261_248 * 2
    assert vllm_plan.weights_bytes_from_dir(tmp_path, "float32") == 8_030_261_248 * 4
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456}}))
    assert vllm_plan.weights_bytes_from_dir(tmp_path) == 123456


def test_a_directory_without_a_model_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"config\.json"):
        vllm_plan.weights_bytes_from_dir(tmp_path)


def test_8b_on_eight_h100_is_eight_replicas() -> None:
    split = vllm_plan.choose(8, H100_MEM, 16.06e9)
    assert (split.tensor_parallel, split.data_parallel, split.gpus_used) == (1, 8, 8)


def test_8b_on_one_h200_is_one_replica() -> None:
    split = vllm_plan.choose(1, H200_MEM, 16.06e9)
    assert (split.tensor_parallel, split.data_parallel) == (1, 1)


def test_70b_needs_tensor_parallelism_sized_by_memory() -> None:
    assert _tpdp(vllm_plan.choose(8, H100_MEM, 141e9)) == (4, 2)   # 141/4 = 35 GB <= 0.675 x 85.5 GB
    assert _tpdp(vllm_plan.choose(8, H200_MEM, 141e9)) == (2, 4)   # 70.5 GB <= 0.675 x 150.8 GB


def test_a_model_too_big_for_the_machine_uses_all_gpus_and_says_so() -> None:
    split = vllm_plan.choose(1, H200_MEM, 141e9)
    assert (split.tensor_parallel, split.data_parallel) == (1, 1) and "out of memory" in split.reason


def test_user_values_win_and_bad_ones_are_refused() -> None:
    assert _tpdp(vllm_plan.choose(8, H100_MEM, 16.06e9, tensor_parallel=2)) == (2, 4)
    assert _tpdp(vllm_plan.choose(8, H100_MEM, 16.06e9, data_parallel=2)) == (1, 2)
    with pytest.raises(UsageError, match="tensor_parallel=16"):
        vllm_plan.choose(8, H100_MEM, 16.06e9, tensor_parallel=16)
    with pytest.raises(UsageError, match="data_parallel=5"):
        vllm_plan.choose(8, H100_MEM, 16.06e9, tensor_parallel=2, data_parallel=5)
    with pytest.raises(UsageError, match="at least one GPU"):
        vllm_plan.choose(0, 0, 1.0)


def test_serve_args_carry_the_split_and_the_batch_limits() -> None:
    settings = vllm_plan.ServeSettings(model="/models/llama", port=8123, dtype="bfloat16", max_num_seqs=128)
    args = vllm_plan.serve_args(settings, vllm_plan.choose(8, H100_MEM, 16.06e9))
    flags = dict(zip(args[3::2], args[4::2], strict=False))
    assert args[:3] == ("vllm", "serve", "/models/llama")
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8123"
    assert flags["--tensor-parallel-size"] == "1" and flags["--data-parallel-size"] == "8"
    assert flags["--max-num-seqs"] == "128" and flags["--max-model-len"] == "8192"
    assert flags["--generation-config"] == "vllm"
    assert vllm_plan.concurrency(settings, vllm_plan.choose(8, H100_MEM, 16.06e9)) == 1024


# --- the recipe renders the same rule (cmx plan) -------------------------------------------

def _rendered(tags: str, inputs: dict[str, Any], facts: str) -> dict[str, Any]:
    from cmx_core.testing.runs import plan_view

    view = plan_view(tags, inputs, facts_file=FACTS / f"{facts}.json").to_json()
    root = next(n for n in view["nodes"] if n["recipe"] == "mlperf-inference-llama")
    (step,) = root["steps"]
    return dict(step["rendered"])


def _gpus(facts: str) -> tuple[int, int]:
    devices = json.loads((FACTS / f"{facts}.json").read_text())["facts"]["gpus"]["devices"]
    return len(devices), min(d["memory_total_bytes"] for d in devices)


CASES = [
    ("mlperf,inference,llama,h100", "h100-sxm-8x", {"model_path": "/models/llama-3.1-8b"}, 16.06e9, None),
    ("mlperf,inference,llama,h100", "h100-sxm-8x", {"model_path": "/m", "model_gb": 141}, 141e9, None),
    ("mlperf,inference,llama,h100", "h100-sxm-8x", {"tensor_parallel": "2"}, 0.0, 2),
    ("mlperf,inference,llama,h200", "h200-1x", {}, 0.0, None),
    ("mlperf,inference,llama,h200", "h200-1x", {"model_path": "/m", "model_gb": 141}, 141e9, None),
    ("mlperf,inference,llama,a100", "a100-80gb-mig", {"model_path": "/m"}, 16.06e9, None),
    ("mlperf,inference,llama", "l4-1x", {"backend": "vllm", "model_path": "/m"}, 16.06e9, None),
    ("mlperf,inference,llama", "mi300x-8x", {"backend": "vllm", "model_path": "/m", "model_gb": 810}, 810e9, None),
]


@pytest.mark.parametrize(("tags", "facts", "inputs", "weights", "tp"), CASES)
def test_the_recipe_plans_what_vllm_plan_chooses(cmx_home: Path, tags: str, facts: str, inputs: dict[str, Any],
                                                 weights: float, tp: int | None) -> None:
    rendered = _rendered(tags, inputs, facts)
    params = rendered["sut_params"]
    launch = params["launch"]
    flags = {str(k): str(v) for k, v in zip(launch[3::2], launch[4::2], strict=False)}
    split = vllm_plan.choose(*_gpus(facts), weights, tensor_parallel=tp)
    assert flags["--tensor-parallel-size"] == str(split.tensor_parallel)
    assert flags["--data-parallel-size"] == str(split.data_parallel)
    assert int(params["concurrency"]) == 256 * split.data_parallel  # max_num_seqs x data_parallel
    assert flags["--max-num-seqs"] == "256" and flags["--host"] == "127.0.0.1"
    assert flags["--max-model-len"] == ("8192" if inputs.get("model_path") else "512")
    assert flags["--dtype"] == ("bfloat16" if inputs.get("model_path") else "auto")
    assert flags["--generation-config"] == "vllm" and flags["--gpu-memory-utilization"] == "0.9"
    assert int(params["max_tokens"]) == 128  # the llama3.1-8b reference's max_new_tokens on GPUs


def test_eight_h100_plan_shows_eight_replicas_and_a_user_concurrency_wins(cmx_home: Path) -> None:
    params = _rendered("mlperf,inference,llama,h100", {"model_path": "/m", "concurrency": 100, "max_num_seqs": 64},
                       "h100-sxm-8x")["sut_params"]
    launch = [str(arg) for arg in params["launch"]]
    assert launch[launch.index("--data-parallel-size") + 1] == "8"
    assert launch[launch.index("--max-num-seqs") + 1] == "64"
    assert int(params["concurrency"]) == 100


def test_cpu_keeps_its_short_generation_and_gpus_get_the_reference_length(cmx_home: Path) -> None:
    cpu = _rendered("mlperf,inference,llama", {}, "h200-1x")
    assert cpu["sut"] == "hf-llm" and int(cpu["sut_params"]["max_new_tokens"]) == 32
    gpu = _rendered("mlperf,inference,llama,h200", {"backend": "transformers"}, "h200-1x")
    assert gpu["sut"] == "hf-llm" and int(gpu["sut_params"]["max_new_tokens"]) == 128


def test_an_unsupported_tensor_parallel_is_refused_at_plan_time(cmx_home: Path) -> None:
    with pytest.raises(CmxError, match="tensor_parallel"):
        _rendered("mlperf,inference,llama,h100", {"tensor_parallel": "3"}, "h100-sxm-8x")


# --- derive: the typed function the recipe calls (mlperf_vllm_split) ----------------------

GIB = 1 << 30


@pytest.mark.parametrize(("gpus", "memory_gib", "weights_gb", "tp", "dp"), [
    (1, 80, 16.06, 1, 1), (2, 80, 16.06, 1, 2), (4, 80, 16.06, 1, 4), (8, 80, 16.06, 1, 8),
    (3, 80, 16.06, 1, 3), (8, 24, 16.06, 1, 8),      # an L4: 16.06 <= 0.675 x 25.8 GB
    (8, 16, 16.06, 2, 4), (8, 8, 16.06, 4, 2),        # smaller GPUs need tensor parallelism
    (8, 80, 141.0, 4, 2), (8, 141, 141.0, 2, 4), (4, 40, 141.0, 4, 1),
    (2, 40, 141.0, 2, 1),                             # too big: all GPUs (and says so)
    (8, 192, 810.0, 8, 1), (1, 80, 0.0, 1, 1),
])
def test_derive_over_gpu_counts_and_memory(gpus: int, memory_gib: int, weights_gb: float, tp: int, dp: int) -> None:
    devices = [{"memory_total_bytes": memory_gib * GIB}] * gpus
    derived = vllm_plan.derive(devices, vllm_plan.SplitInputs(model_gb=weights_gb, max_num_seqs=256))
    assert (derived.tensor_parallel, derived.data_parallel) == (tp, dp)
    assert derived.concurrency == 256 * dp and derived.gpus == gpus
    assert derived.gpu_memory_gb == round(memory_gib * GIB / 1e9, 2)


def test_the_smallest_gpu_sizes_the_split() -> None:
    devices = [{"memory_total_bytes": 80 * GIB}] * 7 + [{"memory_total_bytes": 8 * GIB}]
    sized = vllm_plan.derive(devices, vllm_plan.SplitInputs(model_gb=16.06))
    assert (sized.tensor_parallel, vllm_plan.derive(devices).gpus) == (4, 8)


def test_derive_for_recipe_reads_the_recipe_inputs() -> None:
    devices = [{"memory_total_bytes": H100_MEM}] * 8
    auto = {"model_gb": 0, "model_path": "/m", "tensor_parallel": "auto", "data_parallel": "auto",
            "max_num_seqs": 64, "concurrency": 0}
    derived = vllm_plan.derive_for_recipe(devices, auto)
    assert (derived.tensor_parallel, derived.data_parallel, derived.concurrency) == (1, 8, 512)
    assert derived.weights_gb == vllm_plan.LLAMA31_8B_GB  # model_path without model_gb: llama3.1-8b
    fixed = vllm_plan.derive_for_recipe(devices, {**auto, "tensor_parallel": "2", "concurrency": 100})
    assert (fixed.tensor_parallel, fixed.data_parallel, fixed.concurrency) == (2, 4, 100)
    assert vllm_plan.derive_for_recipe(devices, {**auto, "model_path": None}).weights_gb == 0
    with pytest.raises(UsageError, match="model_gb"):
        vllm_plan.derive_for_recipe(devices, {**auto, "model_gb": "lots"})
    with pytest.raises(UsageError, match="memory_total_bytes"):
        vllm_plan.derive([{"name": "H100"}])
    with pytest.raises(UsageError, match="at least one GPU"):
        vllm_plan.derive([], vllm_plan.SplitInputs(model_path="/m"))


def test_the_template_function_is_registered_and_typed_checks_accept_it() -> None:
    import cmx_mlperf.plugin  # noqa: F401 - registers mlperf_vllm_split
    from cmx_core.testing.recipes import render_value, template_functions

    assert "mlperf_vllm_split" in template_functions()
    context = {"facts": {"gpus": {"devices": [{"memory_total_bytes": H100_MEM}] * 8}},
               "inputs": {"model_path": "/m", "max_num_seqs": 256}}
    assert render_value("{{ mlperf_vllm_split(facts.gpus.devices, inputs).data_parallel }}", context, "t") == 8


def test_the_h100_plan_shows_the_derived_values_with_their_inputs(cmx_home: Path) -> None:
    rendered = _rendered("mlperf,inference,llama,h100", {"model_path": "/models/llama-3.1-8b"}, "h100-sxm-8x")
    derived = rendered["derived"]
    assert derived["inputs"] == {"gpus": 8, "gpu_memory_gb": round(H100_MEM / 1e9, 2), "weights_gb": 16.06,
                                 "weights_from": "assumed: llama3.1-8b in bfloat16 (/models/llama-3.1-8b is not on "
                                                 "this machine; give model_gb to size another model)"}
    assert (derived["tensor_parallel"], derived["data_parallel"], derived["concurrency"]) == (1, 8, 2048)
    assert "16.06 GB of weights" in derived["reason"] and "8 GPU(s) // 1" in derived["reason"]


def test_cmx_plan_text_shows_the_derived_line(cmx_home: Path) -> None:
    from cmx_core.testing.runs import plan_view

    text = plan_view("mlperf,inference,llama,h100", {"model_path": "/m"},
                     facts_file=FACTS / "h100-sxm-8x.json").render_text()
    line = next(x for x in text.splitlines() if "derived:" in x)
    assert '"tensor_parallel": 1' in line and '"data_parallel": 8' in line and '"gpus": 8' in line


def test_the_doc_shows_the_plan_of_the_h100_facts(cmx_home: Path) -> None:
    """docs/mlperf-vllm.md's derived line is what the plan of h100-sxm-8x.json shows."""
    doc = (REPO / "docs" / "mlperf-vllm.md").read_text()
    shown = doc[doc.index("derived: {"):].split("\n```")[0]
    derived = _rendered("mlperf,inference,llama,h100", {"model_path": "/m"}, "h100-sxm-8x")["derived"]
    assert json.dumps(derived["inputs"]) in shown.replace("\n", " ")
    for key in ("tensor_parallel", "data_parallel", "concurrency"):
        assert f'"{key}": {derived[key]}' in shown
    assert "mlperf_vllm_split(facts.gpus.devices, inputs)" in doc
    assert "mlperf_vllm_split(facts.gpus.devices, inputs)" in (
        REPO / "plugins/mlperf/src/cmx_mlperf/recipes/llama.yaml").read_text()


def test_the_weight_size_comes_from_the_model_served(tmp_path: Path) -> None:
    """#50 item 6: with ``model_path`` a directory here, the weights are its own (the
    safetensors index's total), not llama3.1-8b's 16.06 GB; a path not on this machine (a plan
    for another) assumes that size and says so; ``model_gb`` wins over both."""
    model = tmp_path / "llama-70b"
    model.mkdir()
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 141_107_412_992}}))
    devices = [{"memory_total_bytes": H100_MEM}] * 8
    read = vllm_plan.derive(devices, vllm_plan.SplitInputs(model_path=str(model)))
    assert read.weights_gb == 141.11 and read.weights_from == f"read from {model}"
    assert read.tensor_parallel == vllm_plan.choose(8, H100_MEM, 141_107_412_992).tensor_parallel > 1
    elsewhere = vllm_plan.derive(devices, vllm_plan.SplitInputs(model_path=str(tmp_path / "not-here")))
    assert elsewhere.weights_gb == 16.06 and elsewhere.weights_from.startswith("assumed: llama3.1-8b")
    given = vllm_plan.derive(devices, vllm_plan.SplitInputs(model_path=str(model), model_gb=20))
    assert (given.weights_gb, given.weights_from) == (20, "model_gb")
    assert read.as_dict()["inputs"]["weights_from"] == read.weights_from  # type: ignore[index]
