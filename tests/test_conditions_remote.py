"""A remote executor's result carries its far side's ``conditions`` (the far ``cmx run
--lock`` measured the machine the steps ran on); a local run's has its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_core.plugins import loader as plugins
from cmx_core.run import engine
from tests.remote_plugin import subprocess_executor


@pytest.fixture
def registry(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[plugins.Registry]:
    loaded = plugins.load_registry(extra=[("subprocess-exec", subprocess_executor)])
    monkeypatch.setattr(plugins, "_REGISTRY", loaded)
    yield loaded


def test_the_far_sides_conditions_are_kept(registry: plugins.Registry) -> None:
    remote = engine.run_tags("demo,sort", {"size": 300}, executor="subprocess")
    far = json.loads((remote.run_dir / "remote" / "result.json").read_text())
    assert "conditions" in far and remote.document["conditions"] == far["conditions"]
    local = engine.run_tags("demo,sort", {"size": 300}, executor="local", use_cache=False)
    assert set(local.document["conditions"]) == set(far["conditions"])
