"""The stand-in API server (standin.py) for each test that needs a cluster, and its kubeconfig."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import standin


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, standin.StandIn]]:
    """(kubeconfig path, server state) of a stand-in on 127.0.0.1, stopped after the test."""
    root = tmp_path / "standin"
    root.mkdir()
    server, state = standin.serve(root)
    try:
        yield standin.kubeconfig(tmp_path / "kubeconfig", server.server_address[1]), state
    finally:
        state.stop_all()
        server.shutdown()
        server.server_close()
