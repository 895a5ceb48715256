"""The ``openai-http`` SUT: LoadGen as the client of an OpenAI-compatible server.

This is the FlexBench design: the system under test is any endpoint speaking the OpenAI
completions API (vLLM, SGLang, TGI, the loopback test server). Each issued sample becomes a
``POST /v1/completions`` with ``stream: true`` on a bounded thread pool; the first streamed
chunk is reported as LoadGen's first token (TTFT), ``data: [DONE]`` completes the sample.

Token counts (LoadGen's ``n_tokens``, hence TPOT and tokens/s) come from the server's
``usage.completion_tokens``, else the token ids it returned, else the local tokenizer
re-encoding the text (``model_dir``, or the served model id when it is a local directory),
else the chunk count, with a warning (:mod:`~cmx_mlperf.llm.token_counts`). The response
bytes are int32 token ids, as MLPerf's reference SUTs send (:mod:`~cmx_mlperf.llm.responses`,
which also defines the failure mark: empty bytes). The arrival of every token-carrying chunk
is timed for inter-token latency (:mod:`~cmx_mlperf.llm.itl`). ``extra_results()`` returns
ITL, the token-count source, warnings and the serving engine's version; ``model_info`` and
``dataset_info`` describe the weights (:mod:`~cmx_mlperf.llm.describe`). ITL, token counts
and warnings pool every sample the SUT completed in its process, which includes the few the
harness issues to calibrate before LoadGen starts.

A failing request (connection refused, HTTP error, malformed JSON, a stream dropped before
``[DONE]``, a timeout) still completes its sample, with an error mark in the response bytes;
failures are counted and :meth:`OpenAIHttpSUT.errors` lists their reasons. LoadGen is never
left waiting for a sample. The harness reads :meth:`OpenAIHttpSUT.errors` after the test: the
result keeps LoadGen's numbers, with status ``error`` and the counted reasons (e.g.
``6 of 12 samples: HTTP 500``) in ``invalid_reasons``. With ``fail_on_errors: true``
:meth:`OpenAIHttpSUT.stop` raises :class:`~cmx_mlperf.llm.errors.SampleErrors` instead, so
the step fails with those reasons and no result.

Optionally the SUT starts the server itself (``launch``: an argument list such as
``[vllm, serve, /models/llama, --port, 8000]``), waits until ``/v1/models`` answers and stops
that process (by its PID) in :meth:`OpenAIHttpSUT.stop`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_mlperf.llm import describe
from cmx_mlperf.llm.cnndm import samples_and_info
from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.errors import ModelDirError, ServerUnreachable, UsageError, raise_if_errors
from cmx_mlperf.llm.itl import ItlPool
from cmx_mlperf.llm.openai_client import Endpoint, RequestFailed, StreamResult, get_json, stream_completion
from cmx_mlperf.llm.params import parse_params
from cmx_mlperf.llm.responses import FAILED, ResponseCodec
from cmx_mlperf.llm.rouge import rouge_metrics
from cmx_mlperf.llm.token_counts import TokenCountTally
from cmx_mlperf.llm.tokens import ids_to_bytes

log = logging.getLogger("cmx.mlperf.openai_http")


@dataclass(frozen=True)
class OpenAIHttpConfig:
    """``sut_params`` of the ``openai-http`` SUT."""

    base_url: str = "http://127.0.0.1:8000"
    model: str = ""  # empty: the first model the server lists
    max_tokens: int = 32
    min_tokens: int = 2  # vLLM/SGLang extension; LoadGen's TPOT needs >= 2 tokens; 0 omits it
    timeout_s: float = 120.0
    concurrency: int = 16
    total_sample_count: int = len(SAMPLES)
    performance_sample_count: int | None = None
    launch: tuple[str, ...] = ()
    ready_timeout_s: float = 900.0
    check_server: bool = True
    fail_on_errors: bool = False  # True: stop() raises SampleErrors listing the failures
    model_dir: str = ""  # the served weights, for tokenizer and model_info; empty: the model id if it is a dir
    return_token_ids: bool = True  # ask for the generated ids (vLLM >= 0.10.2); other servers ignore it
    dataset_path: str | None = None  # a local cnn_eval.json (llm/cnndm.py); None: the built-in set


class OpenAIHttpSUT:
    """Implements :class:`cmx_mlperf.sut.SUT` over HTTP."""

    name = "openai-http"
    uses_tokens = True

    def __init__(self, config: OpenAIHttpConfig) -> None:
        self.config = config
        self.endpoint = Endpoint.parse(config.base_url)
        self.total_sample_count = config.total_sample_count
        self.performance_sample_count = config.performance_sample_count or config.total_sample_count
        self.model = config.model
        self._completer: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._failures: Counter[str] = Counter()
        self._completed = 0
        self._lock = threading.Lock()
        self._codec = ResponseCodec(None)
        self._itl = ItlPool()
        self._counts = TokenCountTally(self.name)
        self._encodings: Counter[str] = Counter()
        self._engine = describe.Engine(None, None)
        self._engine_note: str | None = None
        self.model_name = config.model
        self.model_info: dict[str, Any] | None = None
        self._samples, self.dataset_info = samples_and_info(config.dataset_path)

    # -- lifecycle -------------------------------------------------------------------
    def start(self, completer: Any) -> None:
        if self.config.launch:
            self._launch()
        if self.config.check_server or not self.model:
            self._check_server()
            self._engine_version()
        self._describe_model()
        self._completer = completer
        self._pool = ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="openai-http")

    def load_samples(self, indices: list[int]) -> None:
        return None

    def unload_samples(self, indices: list[int]) -> None:
        return None

    def issue(self, response_ids: list[int], sample_indices: list[int]) -> None:
        assert self._pool is not None, "start() first"
        for rid, idx in zip(response_ids, sample_indices, strict=True):  # LoadGen pairs them one to one
            self._pool.submit(self._one, rid, idx)

    def flush(self) -> None:
        return None

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._process is not None:
            _terminate(self._process)
            self._process = None
        if self.config.fail_on_errors:
            raise_if_errors(self.name, self.errors())

    def errors(self) -> list[str]:
        """One line per failure reason with its count, e.g. ``"3 of 40 samples: HTTP 500"``."""
        with self._lock:
            total = self._completed
            return [f"{n} of {total} samples: {reason}" for reason, n in sorted(self._failures.items())]

    @property
    def error_count(self) -> int:
        with self._lock:
            return sum(self._failures.values())

    def extra_results(self) -> dict[str, Any]:
        """ITL, the token-count source, the accuracy-log encoding, warnings and packages."""
        itl, counts = self._itl.extra(), self._counts.extra()
        with self._lock:
            encodings = dict(self._encodings)
        warnings = [*counts["warnings"], *_encoding_warnings(encodings)]
        serving = {"url": self.endpoint.url, "engine": self._engine.name, "version": self._engine.version,
                   "model": self.model, "note": self._engine_note}
        mlperf = {**itl["mlperf"], **counts["mlperf"], "accuracy_log_encoding": encodings, "serving": serving}
        return {"metrics": itl["metrics"], "mlperf": mlperf, "warnings": warnings,
                "packages": describe.serving_packages(self._engine)}

    # -- one sample --------------------------------------------------------------------
    def _one(self, response_id: int, sample_index: int) -> None:
        sent_first = False

        def on_first(text: str, ids: list[int] | None) -> None:
            nonlocal sent_first
            sent_first = True
            self._completer.first_token(response_id, ids_to_bytes(ids) if ids else text.encode())

        prompt = self._samples[sample_index % len(self._samples)].prompt
        data, n_tokens, reason = FAILED, 0, ""
        try:
            result = stream_completion(self.endpoint, self._body(prompt), self.config.timeout_s, on_first)
            data, n_tokens = self._record(result)
        except RequestFailed as exc:
            reason = exc.reason
        except Exception as exc:  # noqa: BLE001 - never leave a LoadGen sample uncompleted
            reason = f"client error: {type(exc).__name__}: {str(exc)[:160]}"
        with self._lock:
            self._completed += 1
            if reason:
                self._failures[reason] += 1
        if not sent_first:
            self._completer.first_token(response_id, b"")
        self._completer.complete(response_id, data, n_tokens)

    def _record(self, result: StreamResult) -> tuple[bytes, int]:
        """Encode a successful sample and count it (ITL gaps, token-count source)."""
        encoded = self._codec.encode(result)
        self._itl.add(result.chunk_ns)
        self._counts.add(encoded.count_source, result.chunks)
        with self._lock:
            self._encodings[encoded.encoding] += 1
        return encoded.data, encoded.n_tokens

    def _body(self, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": self.config.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.config.min_tokens:
            body["min_tokens"] = self.config.min_tokens
        if self.config.return_token_ids:
            body["return_token_ids"] = True
        return body

    # -- server ------------------------------------------------------------------------
    def _check_server(self) -> None:
        try:
            models = get_json(self.endpoint, "/v1/models", timeout_s=min(self.config.timeout_s, 10.0))
        except RequestFailed as exc:
            raise ServerUnreachable(
                f"sut openai-http: server {self.endpoint.url} unreachable ({exc.reason}); start it or set launch"
            ) from None
        entries = [m for m in models.get("data", []) if isinstance(m, dict)] if isinstance(models, dict) else []
        if not self.model:
            if not entries:
                raise ServerUnreachable(f"sut openai-http: server {self.endpoint.url} lists no model; set model")
            self.model = str(entries[0].get("id"))
        owners = [m.get("owned_by") for m in entries if m.get("id") == self.model and m.get("owned_by")]
        self._engine = describe.Engine(str(owners[0]) if owners else None, self._engine.version)

    def _engine_version(self) -> None:
        """The engine's version as the server reports it (vLLM: ``GET /version``); a server
        without the route leaves it null with the reason in ``mlperf.serving.note``."""
        try:
            answer = get_json(self.endpoint, "/version", timeout_s=min(self.config.timeout_s, 10.0))
        except RequestFailed as exc:
            self._engine_note = f"GET /version: {exc.reason}"
            return
        version = answer.get("version") if isinstance(answer, dict) else None
        if version is None:
            self._engine_note = "GET /version: no version in the answer"
            return
        self._engine = describe.Engine(self._engine.name, str(version))
        if self._engine.name is None:
            self._engine_note = "the server names no engine (owned_by); its version is recorded as 'server'"
            self._engine = describe.Engine("server", str(version))

    def _describe_model(self) -> None:
        """``model_info`` and the tokenizer, from the local model directory when there is one."""
        self.model_name = self.model
        model_dir = self.config.model_dir or (self.model if self.model and Path(self.model).is_dir() else "")
        if not model_dir:
            self.model_info = describe.served_model_info(
                self.model, "model_dir not set and the served model id is not a local directory")
            return
        self.model_info = describe.local_model_info(model_dir, self.model)
        self.model_name = str(self.model_info["name"])
        self._codec = ResponseCodec(_load_tokenizer(model_dir))

    def _launch(self) -> None:
        cmd = list(self.config.launch)
        log.info("starting server: %s", " ".join(cmd))
        try:
            self._process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise ServerUnreachable(f"sut openai-http: cannot start {cmd[0]}: {exc.strerror or exc}") from None
        deadline = time.monotonic() + self.config.ready_timeout_s
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                self._process = None
                raise ServerUnreachable(
                    f"sut openai-http: server command {cmd[0]} exited with code {code} before it was ready")
            try:
                get_json(self.endpoint, "/v1/models", timeout_s=2.0)
                return
            except RequestFailed:
                time.sleep(0.25)
        _terminate(self._process)
        self._process = None
        raise ServerUnreachable(
            f"sut openai-http: server {self.endpoint.url} not ready after {self.config.ready_timeout_s:g} s"
        )

    # -- accuracy ----------------------------------------------------------------------
    def accuracy(self, entries: list[Any]) -> dict[str, float]:
        """ROUGE of the logged responses: ids decoded with the tokenizer (as the reference
        script does), or the kept text; empty or unreadable entries count as ``errors``.
        ``tokens_per_sample`` counts ids, or the tokenizer-free fallback's ``n_tokens``."""
        tokenizer = self._codec.tokenizer
        preds, refs, counts = [], [], []
        errors = 0
        for entry in entries:
            decoded = self._codec.decode(entry.data)
            if not decoded:
                errors += 1
                continue
            if isinstance(decoded, str) or tokenizer is None:
                preds.append(str(decoded))
                counts.append(_json_count(entry.data))
            else:
                preds.append(str(tokenizer.decode(decoded, skip_special_tokens=True)))
                counts.append(len(decoded))
            refs.append(self._samples[entry.qsl_idx % len(self._samples)].reference)
        metrics = rouge_metrics(preds, refs, counts)
        metrics["errors"] = float(errors)
        return metrics


def _json_count(data: bytes) -> int:
    """``n_tokens`` of a JSON fallback entry; the id count for server ids kept with their text."""
    try:
        return int(json.loads(data.decode("utf-8"))["n_tokens"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return len(data) // 4


def _encoding_warnings(encodings: dict[str, int]) -> list[str]:
    json_samples = encodings.get("json", 0)
    if not json_samples:
        return []
    total = sum(encodings.values())
    return [f"openai-http: {json_samples} of {total} samples were logged as JSON text, not int32 token ids "
            "(no tokenizer and no token ids from the server); MLPerf's accuracy script cannot read them: "
            "set model_dir"]


def _load_tokenizer(model_dir: str) -> Any:
    """The served model's tokenizer, loaded once from its directory, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer  # deferred: transformers only when this runs (393 modules)


    try:
        return AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types for a bad directory
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ModelDirError(f"sut openai-http: model_dir {model_dir}: no tokenizer ({first})") from None


def _terminate(process: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """Stop a server we started, by its PID: SIGTERM, then SIGKILL after ``grace_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def make(params: Mapping[str, Any]) -> OpenAIHttpSUT:
    """Factory named in ``SUT_FACTORIES['openai-http']``."""
    config = parse_params(OpenAIHttpConfig, params, "openai-http")
    if config.concurrency < 1 or config.max_tokens < 1 or config.timeout_s <= 0:
        raise UsageError("sut openai-http: concurrency and max_tokens must be >= 1 and timeout_s > 0")
    if config.model_dir and not Path(config.model_dir).expanduser().is_dir():
        raise UsageError(f"sut openai-http: sut_params.model_dir {config.model_dir} is not a directory; "
                         "set it to the served model's directory or leave it empty")
    return OpenAIHttpSUT(config)
