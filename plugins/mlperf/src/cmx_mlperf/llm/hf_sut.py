"""The ``hf-llm`` SUT: a Llama-architecture causal LM run in-process with transformers.

A worker thread takes issued samples from a queue, batches what is waiting (up to
``batch_size``), generates greedily and streams: each row's first new token goes to
``completer.first_token`` the moment it exists (LoadGen's TTFT), the whole output to
``completer.complete`` with its token count (TPOT, tokens/s).

A failed generation completes its samples with empty ids; ``errors()`` counts the reasons
and the harness turns them into a result with status ``error`` (``fail_on_errors: true``
makes ``stop()`` raise instead, so the step fails).

Response bytes follow MLPerf's LLM reference SUTs: the generated token ids as little-endian
int32 (up to and including EOS), so ``accuracy`` decodes them with the model's tokenizer.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_mlperf.llm.cnndm import samples_and_info
from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.describe import MLPERF_DTYPES, local_model_info
from cmx_mlperf.llm.errors import UsageError, raise_if_errors
from cmx_mlperf.llm.generate import GenerationSettings, LlamaGenerator
from cmx_mlperf.llm.model_dir import NAME_KEY, check_llama_dir
from cmx_mlperf.llm.params import parse_params
from cmx_mlperf.llm.rouge import rouge_metrics
from cmx_mlperf.llm.tokens import ids_from_bytes, ids_to_bytes

log = logging.getLogger("cmx.mlperf.hf_llm")

_STOP = object()


@dataclass(frozen=True)
class HfLlmConfig:
    """``sut_params`` of the ``hf-llm`` SUT."""

    model_dir: str
    max_new_tokens: int = 32
    min_new_tokens: int = 2
    batch_size: int = 1
    total_sample_count: int = len(SAMPLES)
    performance_sample_count: int | None = None
    threads: int | None = 1  # a tiny model is fastest single-threaded; 0 keeps torch's default
    device: str = "cpu"
    dtype: str = "float32"
    fail_on_errors: bool = False  # True: stop() raises SampleErrors listing the failures
    dataset_path: str | None = None  # a local cnn_eval.json (llm/cnndm.py); None: the built-in set


@dataclass(frozen=True)
class _Pending:
    response_id: int
    sample_index: int


class HfLlmSUT:
    """Implements :class:`cmx_mlperf.sut.SUT` for a local Llama model."""

    name = "hf-llm"
    uses_tokens = True

    def __init__(self, config: HfLlmConfig, model_name: str = "") -> None:
        self.config = config
        self.total_sample_count = config.total_sample_count
        self.performance_sample_count = config.performance_sample_count or config.total_sample_count
        self._generator: LlamaGenerator | None = None
        self._prompts: list[list[int]] = []
        self._queue: queue.Queue[Any] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._completer: Any = None
        self._failures: Counter[str] = Counter()
        self._completed = 0
        self.model_name = model_name or Path(config.model_dir).name or str(config.model_dir)
        self.model_info: dict[str, Any] | None = None
        self._samples, self.dataset_info = samples_and_info(config.dataset_path)

    # -- lifecycle -------------------------------------------------------------------
    def start(self, completer: Any) -> None:
        cfg = self.config
        settings = GenerationSettings(cfg.max_new_tokens, cfg.min_new_tokens, cfg.device, cfg.dtype, cfg.threads)
        self._generator = LlamaGenerator(cfg.model_dir, settings)
        self._prompts = [self._generator.encode(s.prompt) for s in self._samples]
        self._warm_up()
        self.model_info = self._model_info()
        self._completer = completer
        self._worker = threading.Thread(target=self._run, name="hf-llm-worker", daemon=True)
        self._worker.start()

    def _warm_up(self) -> None:
        """One single and one full batch before timing starts (first calls allocate)."""
        assert self._generator is not None
        for rows in sorted({1, self.config.batch_size}):
            self._generator.generate([self._prompts[i % len(self._prompts)] for i in range(rows)], _ignore, 4)

    def _model_info(self) -> dict[str, Any]:
        """The result's ``model`` section (the harness reads ``model_info``): what the model
        directory says (weights digest, files), with the loaded model's exact parameter count
        and the data type it runs in, named as MLPerf names it (``fp32``, ``bf16``)."""
        assert self._generator is not None
        model = self._generator.model
        dtype = str(next(model.parameters()).dtype).replace("torch.", "")
        return {
            **local_model_info(self.config.model_dir),
            "name": self.model_name,
            "architecture": type(model).__name__,
            "number_of_parameters": int(sum(p.numel() for p in model.parameters())),
            "weight_data_types": MLPERF_DTYPES.get(dtype, dtype),
        }

    def load_samples(self, indices: list[int]) -> None:
        return None  # prompts are tokenized once in start(); the set is tiny

    def unload_samples(self, indices: list[int]) -> None:
        return None

    def issue(self, response_ids: list[int], sample_indices: list[int]) -> None:
        for rid, idx in zip(response_ids, sample_indices, strict=True):  # LoadGen pairs them one to one
            self._queue.put(_Pending(rid, idx))

    def flush(self) -> None:
        return None

    def stop(self) -> None:
        if self._worker is not None:
            self._queue.put(_STOP)
            self._worker.join()
            self._worker = None
        if self.config.fail_on_errors:
            raise_if_errors(self.name, self.errors())

    def errors(self) -> list[str]:
        """One line per failure reason with its count (empty when all went well)."""
        total = self._completed
        return [f"{n} of {total} samples: {reason}" for reason, n in sorted(self._failures.items())]

    @property
    def error_count(self) -> int:
        """Failed samples (the harness reports them as ``mlperf.failed_samples``)."""
        return sum(self._failures.values())

    # -- accuracy --------------------------------------------------------------------
    def accuracy(self, entries: list[Any]) -> dict[str, float]:
        tokenizer = self._tokenizer()
        preds, refs, counts = [], [], []
        errors = 0
        for entry in entries:
            ids = ids_from_bytes(entry.data) if len(entry.data) % 4 == 0 else []
            if not ids:  # a real output has at least one token; empty marks a failed sample
                errors += 1
                continue
            preds.append(str(tokenizer.decode(ids, skip_special_tokens=True)))
            refs.append(self._samples[entry.qsl_idx % len(self._samples)].reference)
            counts.append(len(ids))
        metrics = rouge_metrics(preds, refs, counts)
        metrics["errors"] = float(errors)
        return metrics

    def _tokenizer(self) -> Any:
        if self._generator is not None:
            return self._generator.tokenizer
        from transformers import AutoTokenizer  # deferred: transformers only when this runs (407 modules)

        return AutoTokenizer.from_pretrained(self.config.model_dir, local_files_only=True)

    # -- worker ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            batch = [item]
            while len(batch) < self.config.batch_size:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    self._queue.put(_STOP)
                    break
                batch.append(nxt)
            self._process(batch)

    def _process(self, batch: list[_Pending]) -> None:
        assert self._generator is not None
        completer = self._completer
        first_sent = [False] * len(batch)

        def on_token(row: int, token: int) -> None:
            if not first_sent[row]:
                first_sent[row] = True
                completer.first_token(batch[row].response_id, ids_to_bytes([token]))

        prompts = [self._prompts[p.sample_index % len(self._prompts)] for p in batch]
        try:
            outputs = self._generator.generate(prompts, on_token)
        except Exception as exc:  # noqa: BLE001 - never leave a LoadGen sample uncompleted
            reason = f"generation failed: {type(exc).__name__}: {str(exc)[:160]}"
            log.error(reason)
            self._failures[reason] += len(batch)
            outputs = [[] for _ in batch]
        self._completed += len(batch)
        for row, pending in enumerate(batch):
            if not first_sent[row]:
                completer.first_token(pending.response_id, b"")
            completer.complete(pending.response_id, ids_to_bytes(outputs[row]), len(outputs[row]))


def _ignore(row: int, token: int) -> None:
    return None


def make(params: Mapping[str, Any]) -> HfLlmSUT:
    """Factory named in ``SUT_FACTORIES['hf-llm']``; checks the model dir before loading."""
    config = parse_params(HfLlmConfig, params, "hf-llm")
    info = check_llama_dir(config.model_dir)
    if config.batch_size < 1 or config.max_new_tokens < 1:
        raise UsageError("sut hf-llm: batch_size and max_new_tokens must be at least 1")
    return HfLlmSUT(config, str(info.config.get(NAME_KEY) or ""))
