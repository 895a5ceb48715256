"""A small OpenAI-compatible completions server on loopback, serving a local Llama.

It exists so the ``openai-http`` SUT can be tested against a real server on any machine:
``POST /v1/completions`` (streamed as server-sent events over chunked HTTP/1.1, like vLLM,
or as one JSON body), ``GET /v1/models``, ``GET /version`` (``{"version": ...}`` as vLLM
answers it; the model list names the engine in ``owned_by``, ``cmx-loopback-test-server``)
and ``GET /health``. Generation is greedy and serialised by a lock (one model, CPU).

Like vLLM >= 0.10.2 it returns the generated token ids when the request asks
``return_token_ids: true`` (``token_ids`` in each choice, the ids that chunk carries).
:class:`StreamShape` reproduces what other servers do: ``usage=False`` never sends the
usage chunk (even when ``stream_options.include_usage`` asks for it), ``tokens_per_chunk=N``
streams N tokens per chunk (as vLLM may under load or with speculative decoding).

Fault injection for tests: ``http500`` answers 500, ``bad-json`` sends a truncated JSON
chunk, ``drop`` closes the connection mid-stream; ``every=N`` applies the fault to every
N-th completion request only.

In-process use (tests)::

    with LoopbackServer(model_dir, fault=Fault("drop", every=2)) as server:
        server.url  # http://127.0.0.1:<free port>

As a process: ``python -m cmx_mlperf.llm.test_server --model-dir DIR [--port 0]``; it prints
``LISTENING <url>`` once ready and exits on SIGTERM/SIGINT or after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cmx_core.errors import CmxError
from cmx_mlperf import __version__
from cmx_mlperf.llm.generate import GenerationSettings, LlamaGenerator

FAULT_MODES = ("none", "http500", "bad-json", "drop")
ENGINE_NAME = "cmx-loopback-test-server"
"""What ``/v1/models`` says in ``owned_by`` (vLLM says ``vllm``)."""


def engine_version() -> str:
    """What ``GET /version`` answers: the version of the cmx-mlperf package serving it."""
    return __version__


@dataclass(frozen=True)
class StreamShape:
    """How the stream looks: whether a usage chunk is sent, how many tokens per chunk."""

    usage: bool = True
    tokens_per_chunk: int = 1

    def __post_init__(self) -> None:
        if self.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be at least 1")


@dataclass(frozen=True)
class Fault:
    """Which fault to inject, on every ``every``-th completion request (1: all)."""

    mode: str = "none"
    every: int = 1

    def __post_init__(self) -> None:
        if self.mode not in FAULT_MODES:
            raise ValueError(f"fault mode {self.mode!r} not one of {', '.join(FAULT_MODES)}")
        if self.every < 1:
            raise ValueError("fault every must be at least 1")


class _Backend:
    """The model plus request accounting shared by all handler threads."""

    def __init__(self, model_dir: str | Path, model_name: str, fault: Fault, max_tokens_cap: int,
                 shape: StreamShape) -> None:
        self.generator = LlamaGenerator(model_dir, GenerationSettings(max_new_tokens=max_tokens_cap, threads=1))
        self.model_name = model_name
        self.fault = fault
        self.shape = shape
        self.max_tokens_cap = max_tokens_cap
        self.lock = threading.Lock()
        self._counter = itertools.count(1)
        self.requests = 0

    def next_fault(self) -> str:
        """The fault for the next completion request ("none" when it is spared)."""
        with self.lock:
            n = next(self._counter)
            self.requests = n
        if self.fault.mode != "none" and n % self.fault.every == 0:
            return self.fault.mode
        return "none"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib signature (shadows `format`)
        return None  # quiet: tests and the harness capture stderr

    # -- routes ------------------------------------------------------------------------
    def do_GET(self) -> None:  # name fixed by BaseHTTPRequestHandler
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            data = [{"id": self.server.backend.model_name, "object": "model", "owned_by": ENGINE_NAME}]
            self._send_json(200, {"object": "list", "data": data})
        elif self.path.rstrip("/") == "/version":
            self._send_json(200, {"version": engine_version()})
        elif self.path.rstrip("/") == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # name fixed by BaseHTTPRequestHandler
        if self.path.rstrip("/") not in ("/v1/completions", "/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        request = self._read_request()
        if request is None:
            return
        fault = self.server.backend.next_fault()
        if fault == "http500":
            self._send_json(500, {"error": {"message": "injected fault", "type": "internal_error"}})
            return
        if request.get("stream"):
            self._stream(request, fault)
        else:
            self._complete(request)

    # -- helpers -----------------------------------------------------------------------
    def _read_request(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return None
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            self._send_json(400, {"error": {"message": "prompt must be a string", "type": "invalid_request_error"}})
            return None
        return body

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _limits(self, request: dict[str, Any]) -> tuple[int, int]:
        cap = self.server.backend.max_tokens_cap
        max_tokens = max(1, min(int(request.get("max_tokens") or 16), cap))
        min_tokens = max(0, min(int(request.get("min_tokens") or 0), max_tokens))
        return max_tokens, min_tokens

    def _complete(self, request: dict[str, Any]) -> None:
        backend = self.server.backend
        gen = backend.generator
        max_tokens, min_tokens = self._limits(request)
        with backend.lock:
            ids = gen.generate([gen.encode(request["prompt"])], lambda r, t: None, max_tokens, min_tokens)[0]
        reason = "stop" if ids and ids[-1] == gen.eos_id else "length"
        choice: dict[str, Any] = {"index": 0, "text": gen.decode(ids), "logprobs": None, "finish_reason": reason}
        if request.get("return_token_ids"):
            choice["token_ids"] = list(ids)
        self._send_json(200, {
            "id": f"cmpl-{backend.requests}", "object": "text_completion", "created": int(time.time()),
            "model": backend.model_name, "choices": [choice],
            "usage": {"completion_tokens": len(ids)},
        })

    def _stream(self, request: dict[str, Any], fault: str) -> None:
        backend = self.server.backend
        gen = backend.generator
        max_tokens, min_tokens = self._limits(request)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        base = {"id": f"cmpl-{backend.requests}", "object": "text_completion",
                "created": int(time.time()), "model": backend.model_name}
        ids: list[int] = []
        pending: list[int] = []  # ids generated but not yet sent (tokens_per_chunk > 1)
        text_so_far = ""
        shape = backend.shape
        with_ids = bool(request.get("return_token_ids"))

        def send(delta: str, chunk_ids: list[int], reason: str | None) -> None:
            choice: dict[str, Any] = {"index": 0, "text": delta, "logprobs": None, "finish_reason": reason}
            if with_ids:
                choice["token_ids"] = list(chunk_ids)
            self._chunk("data: " + json.dumps({**base, "choices": [choice]}) + "\n\n")

        def on_token(_row: int, token: int) -> None:
            nonlocal text_so_far
            ids.append(token)
            pending.append(token)
            if fault == "drop" and len(ids) == 3:
                raise _Dropped()
            if fault == "bad-json" and len(ids) == 2:
                self._chunk('data: {"choices": [{"index": 0, "text": "x"\n\n')
            if len(pending) < shape.tokens_per_chunk:
                return
            delta, text_so_far = _delta(gen.decode(ids), text_so_far)
            send(delta, pending, None)
            pending.clear()

        try:
            with backend.lock:
                gen.generate([gen.encode(request["prompt"])], on_token, max_tokens, min_tokens)
        except (_Dropped, OSError):
            self.close_connection = True
            self._abort()
            return
        reason = "stop" if ids and ids[-1] == gen.eos_id else "length"
        send(_delta(gen.decode(ids), text_so_far, final=True)[0], pending, reason)
        if shape.usage and (request.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 0, "completion_tokens": len(ids), "total_tokens": len(ids)}
            self._chunk("data: " + json.dumps({**base, "choices": [], "usage": usage}) + "\n\n")
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _abort(self) -> None:
        """Close the socket mid-stream, without the chunked terminator."""
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _delta(text: str, sent: str, final: bool = False) -> tuple[str, str]:
    """The new text to stream and the text sent so far. A trailing U+FFFD (an incomplete
    UTF-8 sequence) is held back until a later token completes it or the stream ends."""
    stable = text if final else text.rstrip("\ufffd")
    if not stable.startswith(sent):
        return "", sent
    return stable[len(sent):], stable


class _Dropped(Exception):
    """Raised inside generation to simulate a server dropping the stream."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    backend: _Backend

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-request (a timed-out or cancelled query) is no fault of
        the server and prints nothing; anything else is one line on stderr, not a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError)):
            return
        print(f"loopback server: a request from {client_address[0]}:{client_address[1]} failed: {error!r}",
              file=sys.stderr)


class LoopbackServer:
    """The server on 127.0.0.1 (a free port unless ``port`` is given), on a daemon thread."""

    def __init__(
        self,
        model_dir: str | Path,
        fault: Fault | None = None,
        model_name: str = "tiny-llama",
        port: int = 0,
        max_tokens_cap: int = 256,
        shape: StreamShape | None = None,
    ) -> None:
        self._backend = _Backend(model_dir, model_name, fault or Fault(), max_tokens_cap, shape or StreamShape())
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.backend = self._backend
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        if not isinstance(host, str):  # the bound AF_INET socket reports a str; the stub also allows bytes
            host = bytes(host).decode()
        return f"http://{host}:{port}"

    @property
    def requests(self) -> int:
        """How many completion requests arrived so far."""
        return self._backend.requests

    def set_fault(self, fault: Fault) -> None:
        self._backend.fault = fault

    def set_shape(self, shape: StreamShape) -> None:
        self._backend.shape = shape

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="loopback-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cmx_mlperf.llm.test_server", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model-name", default="tiny-llama")
    parser.add_argument("--fault", choices=FAULT_MODES, default="none")
    parser.add_argument("--fault-every", type=int, default=1)
    parser.add_argument("--no-usage", action="store_true", help="never send the usage chunk")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="exit after this long (bounded)")
    args = parser.parse_args(argv)

    try:
        shape = StreamShape(usage=not args.no_usage, tokens_per_chunk=args.tokens_per_chunk)
        server = LoopbackServer(args.model_dir, Fault(args.fault, args.fault_every), args.model_name, args.port,
                                shape=shape)
    except (CmxError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with server:
        print(f"LISTENING {server.url}", flush=True)
        stop.wait(args.max_seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
