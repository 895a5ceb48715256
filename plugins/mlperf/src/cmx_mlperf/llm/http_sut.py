"""The ``openai-http`` SUT: LoadGen as the client of an OpenAI-compatible server.

This is the FlexBench design: the system under test is any endpoint speaking the OpenAI
completions API (vLLM, SGLang, TGI, the loopback test server). Each issued sample becomes a
``POST /v1/completions`` with ``stream: true`` on a bounded thread pool; the first streamed
chunk is reported as LoadGen's first token (TTFT), ``data: [DONE]`` completes the sample
with the server's ``usage.completion_tokens`` (or the number of chunks).

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

Response bytes are UTF-8 JSON: ``{"text": ..., "n_tokens": N}`` or ``{"error": ..., ...}``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.errors import ServerUnreachable, UsageError, raise_if_errors
from cmx_mlperf.llm.openai_client import Endpoint, RequestFailed, StreamResult, get_json, stream_completion
from cmx_mlperf.llm.params import parse_params

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

    # -- lifecycle -------------------------------------------------------------------
    def start(self, completer: Any) -> None:
        if self.config.launch:
            self._launch()
        if self.config.check_server or not self.model:
            self._check_server()
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

    # -- one sample --------------------------------------------------------------------
    def _one(self, response_id: int, sample_index: int) -> None:
        sent_first = False

        def on_first(text: str) -> None:
            nonlocal sent_first
            sent_first = True
            self._completer.first_token(response_id, text.encode())

        prompt = SAMPLES[sample_index % len(SAMPLES)].prompt
        result: StreamResult | None = None
        reason = ""
        try:
            result = stream_completion(self.endpoint, self._body(prompt), self.config.timeout_s, on_first)
        except RequestFailed as exc:
            reason = exc.reason
        except Exception as exc:  # noqa: BLE001 - never leave a LoadGen sample uncompleted
            reason = f"client error: {type(exc).__name__}: {str(exc)[:160]}"
        if result is not None:
            data = {"text": result.text, "n_tokens": result.n_tokens}
            n_tokens = result.n_tokens
        else:
            data = {"error": reason}
            n_tokens = 0
        with self._lock:
            self._completed += 1
            if reason:
                self._failures[reason] += 1
        if not sent_first:
            self._completer.first_token(response_id, b"")
        self._completer.complete(response_id, json.dumps(data).encode(), n_tokens)

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
        return body

    # -- server ------------------------------------------------------------------------
    def _check_server(self) -> None:
        try:
            models = get_json(self.endpoint, "/v1/models", timeout_s=min(self.config.timeout_s, 10.0))
        except RequestFailed as exc:
            raise ServerUnreachable(
                f"sut openai-http: server {self.endpoint.url} unreachable ({exc.reason}); start it or set launch"
            ) from None
        ids = [m.get("id") for m in models.get("data", []) if isinstance(m, dict)] if isinstance(models, dict) else []
        if not self.model:
            if not ids:
                raise ServerUnreachable(f"sut openai-http: server {self.endpoint.url} lists no model; set model")
            self.model = str(ids[0])

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
        from cmx_mlperf.llm.rouge import rouge_metrics

        preds, refs, counts = [], [], []
        errors = 0
        for entry in entries:
            try:
                data = json.loads(entry.data.decode("utf-8"))
                text, n = str(data["text"]), int(data["n_tokens"])
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
                errors += 1
                continue
            preds.append(text)
            refs.append(SAMPLES[entry.qsl_idx % len(SAMPLES)].reference)
            counts.append(n)
        metrics = rouge_metrics(preds, refs, counts)
        metrics["errors"] = float(errors)
        return metrics


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
    return OpenAIHttpSUT(config)
