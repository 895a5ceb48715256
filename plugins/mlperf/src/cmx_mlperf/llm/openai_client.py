"""A minimal streaming client for the OpenAI completions API (stdlib ``http.client``).

Every failure becomes :class:`RequestFailed` whose ``reason`` is short and stable (e.g.
``"HTTP 500"``, ``"connection refused"``, ``"malformed JSON chunk"``, ``"stream dropped
before [DONE]"``), so reasons can be counted across thousands of samples.
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
    text: str
    n_tokens: int
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
    endpoint: Endpoint, body: dict[str, Any], timeout_s: float, on_first: Callable[[str], None]
) -> StreamResult:
    """POST a streamed completion and read its server-sent events to ``[DONE]``.

    ``on_first(text)`` is called once, on the first chunk that carries a choice. The whole
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
    resp: http.client.HTTPResponse, deadline: float, timeout_s: float, on_first: Callable[[str], None]
) -> StreamResult:
    pieces: list[str] = []
    chunks = 0
    usage_tokens: int | None = None
    finish: str | None = None
    while True:
        if time.monotonic() > deadline:
            raise RequestFailed(f"timeout after {timeout_s:g} s")
        line = resp.readline()
        if not line:
            raise RequestFailed("stream dropped before [DONE]")
        text = line.decode("utf-8", errors="replace").strip()
        if not text.startswith("data:"):
            continue  # blank separators, comments (":"), event/id fields
        payload = text[5:].strip()
        if payload == "[DONE]":
            break
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            raise RequestFailed("malformed JSON chunk") from None
        if not isinstance(event, dict):
            raise RequestFailed("malformed JSON chunk")
        if "error" in event:
            raise RequestFailed(f"server error: {_error_message(event['error'])}")
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            usage_tokens = usage["completion_tokens"]
        choices = event.get("choices") or []
        if choices:
            choice = choices[0] if isinstance(choices[0], dict) else {}
            piece = str(choice.get("text") or "")
            finish = choice.get("finish_reason") or finish
            if chunks == 0:
                on_first(piece)
            if piece or choice.get("finish_reason") is None:
                chunks += 1
            pieces.append(piece)
    if chunks == 0 and usage_tokens is None:
        raise RequestFailed("stream ended without tokens")
    return StreamResult("".join(pieces), usage_tokens if usage_tokens is not None else chunks, finish)


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
