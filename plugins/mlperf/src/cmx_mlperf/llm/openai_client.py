"""A minimal streaming client for the OpenAI completions API (stdlib ``http.client``).

Every failure becomes :class:`RequestFailed` whose ``reason`` is short and stable (e.g.
``"HTTP 500"``, ``"connection refused"``, ``"malformed JSON chunk"``, ``"stream dropped
before [DONE]"``), so reasons can be counted across thousands of samples.

The stream is read as it arrives: a :class:`StreamResult` keeps the arrival time of every
chunk that carries generated tokens (for inter-token latency), the number of such chunks,
the server's ``usage.completion_tokens`` when it sent one and the generated token ids when
the server returned them (vLLM's ``return_token_ids``: ``token_ids`` in each choice).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cmx_mlperf.llm.errors import UsageError

FirstChunk = Callable[[str, "list[int] | None"], None]
"""``on_first(text, token_ids)``: the first chunk's text and ids (None when the server sends none)."""


class RequestFailed(Exception):
    """A request that did not produce a complete answer; ``reason`` is one short line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Endpoint:
    """Scheme, host, port and path prefix of an OpenAI-compatible server."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def parse(cls, base_url: str) -> Endpoint:
        """Accepts ``http://host:port``, with or without a trailing ``/v1``."""
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"sut openai-http: base_url {base_url!r} is not an http(s) URL")
        prefix = parts.path.rstrip("/")
        if prefix.endswith("/v1"):
            prefix = prefix[:-3]
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UsageError(f"sut openai-http: base_url {base_url!r} has a bad port") from None
        return cls(parts.scheme, parts.hostname, port, prefix)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.prefix}"

    def connect(self, timeout_s: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout_s)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)


@dataclass(frozen=True)
class StreamResult:
    """One completed stream. ``chunk_ns``: ``time.perf_counter_ns()`` at the arrival of each
    chunk that carries generated tokens (``chunks`` of them); ``usage_tokens``: the server's
    ``usage.completion_tokens`` (None when it sent no usage); ``token_ids``: the generated ids
    the server returned (None when it returned none)."""

    text: str
    chunks: int
    usage_tokens: int | None
    token_ids: tuple[int, ...] | None
    chunk_ns: tuple[int, ...]
    finish_reason: str | None


def get_json(endpoint: Endpoint, path: str, timeout_s: float) -> Any:
    """GET a JSON document; raises :class:`RequestFailed`."""
    conn = endpoint.connect(timeout_s)
    try:
        conn.request("GET", endpoint.prefix + path, headers={"Accept": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RequestFailed(f"HTTP {resp.status}")
        return json.loads(body)
    except RequestFailed:
        raise
    except json.JSONDecodeError:
        raise RequestFailed("malformed JSON body") from None
    except (OSError, http.client.HTTPException) as exc:
        raise RequestFailed(_net_reason(exc, timeout_s)) from None
    finally:
        conn.close()


def stream_completion(
    endpoint: Endpoint, body: dict[str, Any], timeout_s: float, on_first: FirstChunk
) -> StreamResult:
    """POST a streamed completion and read its server-sent events to ``[DONE]``.

    ``on_first(text, ids)`` is called once, on the first chunk that carries a choice (``ids``:
    the token ids it carries, None when the server returns none). The whole
    exchange is bounded by ``timeout_s`` (each socket wait and the total).
    """
    deadline = time.monotonic() + timeout_s
    conn = endpoint.connect(timeout_s)
    try:
        conn.request("POST", endpoint.prefix + "/v1/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            resp.read(4096)
            raise RequestFailed(f"HTTP {resp.status}")
        return _read_events(resp, deadline, timeout_s, on_first)
    except RequestFailed:
        raise
    except (OSError, http.client.HTTPException) as exc:
        raise RequestFailed(_net_reason(exc, timeout_s)) from None
    finally:
        conn.close()


def _read_events(
    resp: http.client.HTTPResponse, deadline: float, timeout_s: float, on_first: FirstChunk
) -> StreamResult:
    pieces: list[str] = []
    arrivals: list[int] = []
    ids: list[int] | None = None
    usage_tokens: int | None = None
    finish: str | None = None
    first = True
    while True:
        if time.monotonic() > deadline:
            raise RequestFailed(f"timeout after {timeout_s:g} s")
        line = resp.readline()
        arrived = time.perf_counter_ns()
        if not line:
            raise RequestFailed("stream dropped before [DONE]")
        event = _event(line)
        if event is None:
            continue
        if event is _DONE:
            break
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            usage_tokens = usage["completion_tokens"]
        choices = event.get("choices") or []
        if not choices:
            continue
        choice = choices[0] if isinstance(choices[0], dict) else {}
        piece = str(choice.get("text") or "")
        chunk_ids = _token_ids(choice)
        finish = choice.get("finish_reason") or finish
        if first:
            first = False
            on_first(piece, chunk_ids)
        if chunk_ids is not None:
            ids = (ids or []) + chunk_ids
        if piece or chunk_ids or choice.get("finish_reason") is None:
            arrivals.append(arrived)  # a chunk that carries tokens (not a bare finish/usage chunk)
        pieces.append(piece)
    if not arrivals and usage_tokens is None:
        raise RequestFailed("stream ended without tokens")
    return StreamResult("".join(pieces), len(arrivals), usage_tokens,
                        None if ids is None else tuple(ids), tuple(arrivals), finish)


_DONE: dict[str, Any] = {}
"""The sentinel :func:`_event` returns for ``data: [DONE]``."""


def _event(line: bytes) -> dict[str, Any] | None:
    """The JSON object of one ``data:`` line, :data:`_DONE`, or None for other SSE lines."""
    text = line.decode("utf-8", errors="replace").strip()
    if not text.startswith("data:"):
        return None  # blank separators, comments (":"), event/id fields
    payload = text[5:].strip()
    if payload == "[DONE]":
        return _DONE
    try:
        event = json.loads(payload)
    except json.JSONDecodeError:
        raise RequestFailed("malformed JSON chunk") from None
    if not isinstance(event, dict):
        raise RequestFailed("malformed JSON chunk")
    if "error" in event:
        raise RequestFailed(f"server error: {_error_message(event['error'])}")
    return event


def _token_ids(choice: dict[str, Any]) -> list[int] | None:
    """The ids a choice carries (``token_ids``), None when it has none or they are not ints."""
    raw = choice.get("token_ids")
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        return None
    return list(raw)


def _error_message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or "unknown")[:160]
    return str(error)[:160]


def _net_reason(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timeout after {timeout_s:g} s"
    if isinstance(exc, http.client.IncompleteRead):
        return "stream dropped before [DONE]"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)):
        return "connection closed by server"
    if isinstance(exc, socket.gaierror):
        return "host not found"
    return f"{type(exc).__name__}: {str(exc)[:120]}"
