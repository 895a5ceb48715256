"""How ``vllm serve`` is spread over a machine's GPUs: tensor parallelism (TP) and data-parallel
replicas (DP), and the server's argument list.

The rule (the llama recipe calls it once per plan through the template function
``mlperf_vllm_split(facts.gpus.devices, inputs)`` that cmx-mlperf registers, so ``cmx plan``
shows the choice and its inputs under the step's ``derived`` setting):

* usable memory of one GPU = its total memory x ``gpu_memory_utilization`` (vLLM's own cap);
* the weights may take at most ``WEIGHT_SHARE`` of it, the rest is headroom for the KV cache,
  activations and CUDA graphs;
* TP is the smallest power of two (1, 2, 4, 8) whose GPUs hold the weights that way, never
  more than the GPU count; DP = GPUs // TP (replicas of the whole TP group).

Either may be fixed by the user; the other is then derived (DP from TP, TP from nothing but the
user's value). Pure functions, no imports of torch or vLLM: this runs at plan time anywhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx_core.errors import UsageError

GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default ``--gpu-memory-utilization``: the share of a GPU it may use at all."""
WEIGHT_SHARE = 0.75
"""At most this share of the usable memory holds weights; the rest is KV cache headroom."""
TP_SIZES = (1, 2, 4, 8)
"""Tensor-parallel sizes tried (Llama head counts divide by each of them)."""
LLAMA31_8B_GB = 16.06
"""llama3.1-8b weights in bfloat16: 8.03e9 parameters x 2 bytes, in GB (1e9 bytes)."""
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class Parallelism:
    """The chosen split and why."""

    tensor_parallel: int
    data_parallel: int
    reason: str

    @property
    def gpus_used(self) -> int:
        return self.tensor_parallel * self.data_parallel


@dataclass(frozen=True)
class ServeSettings:
    """What ``vllm serve`` is started with (besides the split)."""

    model: str
    port: int = 8000
    dtype: str = "auto"
    max_num_seqs: int = 256
    max_model_len: int = 8192
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION


def weights_bytes_from_dir(model_dir: Path, dtype: str = "bfloat16") -> int:
    """The weight bytes of a Hugging Face model directory: the safetensors index's
    ``metadata.total_size`` when there is one, else the parameter count estimated from
    ``config.json`` (Llama layout) times the dtype's bytes."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    single = model_dir / "model.safetensors"
    if single.is_file():
        return single.stat().st_size
    config = model_dir / "config.json"
    if not config.is_file():
        raise UsageError(f"model_path {model_dir}: no config.json or safetensors files; "
                         "give a Hugging Face model directory")
    return llama_parameters(json.loads(config.read_text())) * _DTYPE_BYTES.get(dtype, 2)


def llama_parameters(config: dict[str, object]) -> int:
    """Parameter count of a Llama-layout ``config.json`` (embeddings, attention with grouped
    KV heads, gated MLP, norms; the LM head unless tied)."""
    def num(key: str, default: int | None = None) -> int:
        value = config.get(key, default)
        if not isinstance(value, int):
            raise UsageError(f"config.json: {key} missing or not an integer; cannot size the model")
        return value

    hidden, layers, vocab = num("hidden_size"), num("num_hidden_layers"), num("vocab_size")
    heads = num("num_attention_heads")
    kv_heads = num("num_key_value_heads", heads)
    head_dim = num("head_dim", hidden // heads)
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    mlp = 3 * hidden * num("intermediate_size")
    per_layer = attention + mlp + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    return layers * per_layer + embeddings + hidden


def choose(gpus: int, gpu_memory_bytes: int, weights_bytes: float, tensor_parallel: int | None = None,
           data_parallel: int | None = None) -> Parallelism:
    """TP and DP for ``gpus`` GPUs of ``gpu_memory_bytes`` each serving ``weights_bytes`` of
    weights; ``None`` means auto. A fixed value that does not fit the GPUs is a UsageError."""
    if gpus < 1:
        raise UsageError("vLLM needs at least one GPU, and the facts list none; "
                         "run on a GPU machine or use --backend=transformers on the cpu device")
    if tensor_parallel is not None and not 1 <= tensor_parallel <= gpus:
        raise UsageError(f"tensor_parallel={tensor_parallel}: must be between 1 and the {gpus} GPU(s) here")
    tp, why = (tensor_parallel, "tensor_parallel given") if tensor_parallel else _auto_tp(
        gpus, gpu_memory_bytes, weights_bytes)
    if data_parallel is not None:
        if data_parallel < 1 or tp * data_parallel > gpus:
            raise UsageError(f"data_parallel={data_parallel}: with tensor_parallel={tp} it must be between 1 "
                             f"and {gpus // tp} (the {gpus} GPU(s) here)")
        return Parallelism(tp, data_parallel, f"{why}; data_parallel given")
    return Parallelism(tp, max(gpus // tp, 1), f"{why}; data_parallel = {gpus} GPU(s) // {tp}")


def _auto_tp(gpus: int, gpu_memory_bytes: int, weights_bytes: float) -> tuple[int, str]:
    room = gpu_memory_bytes * GPU_MEMORY_UTILIZATION * WEIGHT_SHARE
    need = math.ceil(weights_bytes / room) if room > 0 else gpus
    for tp in TP_SIZES:
        if tp >= need and tp <= gpus:
            return tp, f"tensor_parallel {tp}: {weights_bytes / 1e9:.2f} GB of weights / {tp} fit(s) in " \
                       f"{WEIGHT_SHARE:g} x {GPU_MEMORY_UTILIZATION:g} x {gpu_memory_bytes / 1e9:.1f} GB"
    return gpus, (f"tensor_parallel {gpus}: all GPUs, yet {weights_bytes / 1e9:.2f} GB of weights need "
                  f"{need} GPU(s) of this size to leave KV headroom (vLLM may run out of memory)")


def serve_args(settings: ServeSettings, split: Parallelism) -> tuple[str, ...]:
    """The ``vllm serve`` command line: loopback only, the split, the batch limits, and
    ``--generation-config vllm`` so the model's ``generation_config.json`` cannot change the
    sampling the requests ask for (greedy, the reference's settings)."""
    return ("vllm", "serve", settings.model, "--host", "127.0.0.1", "--port", str(settings.port),
            "--dtype", settings.dtype,
            "--tensor-parallel-size", str(split.tensor_parallel),
            "--data-parallel-size", str(split.data_parallel),
            "--max-num-seqs", str(settings.max_num_seqs),
            "--max-model-len", str(settings.max_model_len),
            "--gpu-memory-utilization", f"{settings.gpu_memory_utilization:g}",
            "--generation-config", "vllm", "--disable-log-requests")


def concurrency(settings: ServeSettings, split: Parallelism) -> int:
    """Requests in flight that keep every replica's batch full and no more."""
    return settings.max_num_seqs * split.data_parallel


# --- the derived settings a recipe reads (template function ``mlperf_vllm_split``) -------------

@dataclass(frozen=True)
class Derived:
    """vLLM's split and request concurrency, derived from the machine and the recipe's inputs,
    with the inputs it was derived from (``cmx plan`` shows :meth:`as_dict`)."""

    gpus: int
    gpu_memory_gb: float
    weights_gb: float
    tensor_parallel: int
    data_parallel: int
    concurrency: int
    reason: str
    weights_from: str = "model_gb"
    """Where ``weights_gb`` came from (:func:`weights_gb_of`)."""

    def as_dict(self) -> dict[str, object]:
        return {"inputs": {"gpus": self.gpus, "gpu_memory_gb": self.gpu_memory_gb, "weights_gb": self.weights_gb,
                           "weights_from": self.weights_from},
                "tensor_parallel": self.tensor_parallel, "data_parallel": self.data_parallel,
                "concurrency": self.concurrency, "reason": self.reason}


@dataclass(frozen=True)
class SplitInputs:
    """The recipe's inputs to :func:`derive`: weights of ``model_gb`` GB, else read from the
    ``model_path`` served (:func:`weights_gb_of`) and 0 for the tiny model; a fixed
    ``tensor_parallel`` or ``data_parallel`` (None: derived); ``concurrency`` 0 means
    ``max_num_seqs x data_parallel``."""

    model_gb: float = 0.0
    model_path: str | None = None
    tensor_parallel: int | None = None
    data_parallel: int | None = None
    max_num_seqs: int = 256
    concurrency: int = 0


def derive(devices: Sequence[Mapping[str, object]], inputs: SplitInputs | None = None) -> Derived:
    """The split for the detected GPU ``devices`` (their ``memory_total_bytes``; the smallest GPU
    sizes the split) and the recipe's ``inputs`` (None: every input at its default)."""
    inputs = inputs or SplitInputs()
    memories = [_memory(device) for device in devices]
    weights_gb, weights_from = weights_gb_of(inputs)
    split = choose(len(memories), min(memories, default=0), weights_gb * 1e9, inputs.tensor_parallel,
                   inputs.data_parallel)
    settings = ServeSettings(model=str(inputs.model_path or ""), max_num_seqs=inputs.max_num_seqs)
    return Derived(len(memories), round(min(memories, default=0) / 1e9, 2), round(weights_gb, 2),
                   split.tensor_parallel, split.data_parallel, inputs.concurrency or _concurrency(settings, split),
                   split.reason, weights_from)


def weights_gb_of(inputs: SplitInputs) -> tuple[float, str]:
    """The weights' size in GB and where it came from: ``model_gb`` when given; the model
    directory's own (:func:`weights_bytes_from_dir`: the safetensors' size, else the
    parameters of its config.json) when ``model_path`` is a directory here; the size of
    llama3.1-8b in bfloat16, said to be assumed, when it is not (a plan for another machine);
    0 for the tiny model."""
    if inputs.model_gb:
        return inputs.model_gb, "model_gb"
    if not inputs.model_path:
        return 0.0, "the tiny model"
    directory = Path(inputs.model_path)
    if directory.is_dir():
        return weights_bytes_from_dir(directory) / 1e9, f"read from {directory}"
    return LLAMA31_8B_GB, (f"assumed: llama3.1-8b in bfloat16 ({directory} is not on this machine; "
                           "give model_gb to size another model)")


def derive_for_recipe(devices: Sequence[Mapping[str, object]], inputs: Mapping[str, object]) -> Derived:
    """:func:`derive` over the llama recipe's ``inputs`` (``model_gb``, ``model_path``,
    ``tensor_parallel`` and ``data_parallel`` (``auto`` or a number), ``max_num_seqs``,
    ``concurrency``): what the recipe calls as ``mlperf_vllm_split(facts.gpus.devices, inputs)``."""
    def number(key: str, default: float) -> float:
        value = inputs.get(key, default)
        if value in (None, "", "auto"):
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise UsageError(f"mlperf_vllm_split: input {key}={value!r} is not a number")
        try:
            return float(value)
        except ValueError:
            raise UsageError(f"mlperf_vllm_split: input {key}={value!r} is not a number or auto") from None

    def whole(key: str) -> int | None:
        value = number(key, 0)
        return int(value) if value else None

    model_path = inputs.get("model_path")
    return derive(devices, SplitInputs(
        model_gb=number("model_gb", 0.0), model_path=str(model_path) if model_path else None,
        tensor_parallel=whole("tensor_parallel"), data_parallel=whole("data_parallel"),
        max_num_seqs=int(number("max_num_seqs", 256)), concurrency=int(number("concurrency", 0))))


def _memory(device: Mapping[str, object]) -> int:
    value = device.get("memory_total_bytes") if isinstance(device, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UsageError(f"mlperf_vllm_split: a GPU fact without memory_total_bytes: {device!r}")
    return int(value)


_concurrency = concurrency
