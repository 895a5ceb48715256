"""The #19 pieces wired into the engine and the CLI: ``--disable-plugin NAME`` in any position,
the ``cmx_node_failed`` event from a real failing run, and a step's ``ModuleNotFoundError``
naming the extra that brings the module."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from cmx_core.plugins.hookspecs import hookimpl
from cmx_core.plugins.loader import get_registry

FAILS = """
name: fails
tags: [fails]
summary: a shell step that exits 3
cache: false
steps:
  - {uses: shell, with: {cmd: ["sh", "-c", "exit 3"]}}
"""


def _loaded(cli: Callable[..., Any], *extra: str) -> set[str]:
    result = cli("plugins", "list", "--json", *extra)
    assert result.code == 0, result.err
    document = json.loads(result.out)
    plugins = document["plugins"] if isinstance(document, dict) else document
    return {p["name"] for p in plugins}


@pytest.mark.parametrize("how", [["--disable-plugin", "mlperf"], ["--disable-plugin=mlperf"]])
def test_disable_plugin_turns_one_plugin_off(cli: Callable[..., Any], how: list[str]) -> None:
    assert "mlperf" in _loaded(cli)
    assert "mlperf" not in _loaded(cli, *how)
    assert "detect" in _loaded(cli, *how)  # only that one


class _Recorder:
    def __init__(self) -> None:
        self.failed: list[Mapping[str, Any]] = []

    @hookimpl
    def cmx_node_failed(self, node_id: str, recipe: str, error: str, wall_s: float) -> None:
        self.failed.append({"node_id": node_id, "recipe": recipe, "error": error, "wall_s": wall_s})


def test_a_failing_node_fires_cmx_node_failed(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("fails", FAILS)
    recorder = _Recorder()
    get_registry().manager.register(recorder, name="test-recorder")
    try:
        result = cli("run", "--recipes", str(recipes.dir), "--tags=fails", "-q")
    finally:
        get_registry().manager.unregister(recorder)
    assert result.code != 0
    assert [f["node_id"] for f in recorder.failed] == ["fails"]
    assert recorder.failed[0]["recipe"] == "fails" and "exit" in recorder.failed[0]["error"].lower()
    assert recorder.failed[0]["wall_s"] >= 0


NEEDS_LLM = """
name: needs-llm
tags: [needs, llm]
summary: a step of cmx-mlperf whose module is missing
cache: false
steps:
  - {uses: test.needs-transformers}
"""


def _raises_missing_module(ctx: Any) -> Any:
    raise ModuleNotFoundError("No module named 'transformers'", name="transformers")


def test_a_missing_module_names_the_extra_and_its_install_command(cli: Callable[..., Any], recipes: Any) -> None:
    from dataclasses import replace

    from cmx_core.providers.types import StepType

    registry = get_registry()
    step = StepType(name="test.needs-transformers", summary="raises", run=_raises_missing_module)
    registry.steps["test.needs-transformers"] = replace(step, plugin="mlperf")  # as if cmx-mlperf provided it
    recipes("needs-llm", NEEDS_LLM)
    result = cli("run", "--recipes", str(recipes.dir), "--tags=needs,llm", "-q")
    assert result.code != 0
    assert "No module named 'transformers'; it comes with the extra 'llm' of cmx-mlperf: " \
           "cmx plugins install 'cmx-mlperf[llm]'" in result.err


def test_options_that_set_the_environment_are_undone_when_main_returns(cli: Callable[..., Any]) -> None:
    """An in-process ``main()`` (a test, an API user) leaves no --disable-plugin or --strict behind."""
    import os

    assert "mlperf" not in _loaded(cli, "--disable-plugin", "mlperf", "--strict")
    for name in ("CMX_DISABLE_PLUGINS", "CMX_STRICT", "CMX_STRICT_PLUGINS"):
        assert name not in os.environ, name
    assert "mlperf" in _loaded(cli)  # and the next call loads every plugin again
