"""Helpers for tests of the LLM path (used by cmx-mlperf's own tests and by plugins that
build on it): one tiny Llama per pytest session, and a recording completer.

The recording completer is a test double for the harness's LoadGen completer only; the
SUTs, the model and the servers they talk to stay real.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx_mlperf.llm.tiny_llama import build


def shared_tiny_llama(tmp_path_factory: Any) -> Path:
    """Build the default tiny Llama once per pytest session (under its base temp dir)."""
    dest = Path(tmp_path_factory.getbasetemp()) / "cmx-tiny-llama"
    if (dest / "model.safetensors").is_file():
        return dest
    staging = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    build(staging)
    try:
        staging.rename(dest)
    except OSError:  # another worker won the race; use its copy
        pass
    return dest


@dataclass
class Call:
    kind: str  # "first" | "complete"
    response_id: int
    data: bytes
    n_tokens: int | None = None


@dataclass
class RecordingCompleter:
    """Records every ``first_token`` / ``complete`` call (thread-safe) and signals when
    ``expected`` completions have arrived."""

    expected: int = 0
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _done: threading.Event = field(default_factory=threading.Event)

    def first_token(self, response_id: int, data: bytes) -> None:
        with self._lock:
            self.calls.append(Call("first", response_id, bytes(data)))

    def complete(self, response_id: int, data: bytes, n_tokens: int | None = None) -> None:
        with self._lock:
            self.calls.append(Call("complete", response_id, bytes(data), n_tokens))
            if sum(c.kind == "complete" for c in self.calls) >= self.expected:
                self._done.set()

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

    def completions(self) -> dict[int, Call]:
        with self._lock:
            return {c.response_id: c for c in self.calls if c.kind == "complete"}

    def order_problems(self) -> list[str]:
        """Contract violations: an id completed twice, or completed without a first token
        before it, or a first token after completion."""
        problems: list[str] = []
        first: set[int] = set()
        done: set[int] = set()
        with self._lock:
            calls = list(self.calls)
        for call in calls:
            if call.kind == "first":
                if call.response_id in first:
                    problems.append(f"id {call.response_id}: first token twice")
                if call.response_id in done:
                    problems.append(f"id {call.response_id}: first token after completion")
                first.add(call.response_id)
            else:
                if call.response_id in done:
                    problems.append(f"id {call.response_id}: completed twice")
                if call.response_id not in first:
                    problems.append(f"id {call.response_id}: completed without a first token")
                done.add(call.response_id)
        return problems
