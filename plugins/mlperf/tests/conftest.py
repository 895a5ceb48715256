"""Fixtures shared by the LLM tests: the tiny Llama (built once per session) and the
loopback OpenAI-compatible server serving it (one per module, fault mode reset after use)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_mlperf.llm.test_server import Fault, LoopbackServer
from cmx_mlperf.llm.testing import shared_tiny_llama


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: Any) -> Path:
    return shared_tiny_llama(tmp_path_factory)


@pytest.fixture(scope="module")
def server(tiny_llama: Path) -> Iterator[LoopbackServer]:
    with LoopbackServer(tiny_llama) as srv:
        yield srv


@pytest.fixture
def faulty(server: LoopbackServer) -> Iterator[LoopbackServer]:
    yield server
    server.set_fault(Fault())
