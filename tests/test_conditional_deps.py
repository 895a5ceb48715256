"""A step type's conditional deps (run by the step itself, decided at run time) are shown by
``cmx plan`` and ``cmx explain`` under their step, in text and in --json."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from cmx_core.api import ConditionalDep, StepType, hookimpl
from cmx_core.plugins import loader as plugins


def _deps(params: Mapping[str, Any]) -> list[ConditionalDep]:
    return [ConditionalDep("prehook_deps", str(params.get("then", "")), "X in [yes]", alias="later"),
            ConditionalDep("post_deps", "get,tidy")]


class _Plugin:
    @hookimpl
    def cmx_register_steps(self, register: Any) -> None:
        register(StepType(name="cond.step", summary="runs deps of its own", run=lambda ctx: {},
                          conditional_deps=_deps))


RECIPE = """
    name: cond
    tags: [cond]
    summary: a step with conditional deps
    steps: [{uses: cond.step, with: {then: "get,thing"}}]
"""


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("cond", _Plugin())]))


@pytest.mark.usefixtures("registry")
def test_plan_and_explain_show_them(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("cond", RECIPE)
    expected = ["conditional dep later: get,thing (prehook_deps; decided at run time: if X in [yes])",
                "conditional dep get,tidy (post_deps; decided at run time: always, at its turn)"]
    text = cli("plan", "--recipes", recipes.dir, "--tags=cond", "--wide")  # a line a dep
    assert text.code == 0, text.err
    assert [line.strip() for line in text.out.splitlines() if "conditional dep" in line] == expected
    document = json.loads(cli("plan", "--recipes", recipes.dir, "--tags=cond", "--json").out)
    [step] = document["nodes"][0]["steps"]
    assert step["conditional_deps"][0] == {"stage": "prehook_deps", "tags": "get,thing", "condition": "X in [yes]",
                                           "alias": "later"}
    explained = cli("explain", "--recipes", recipes.dir, "--tags=cond", "--wide")
    assert [line.strip() for line in explained.out.splitlines() if "conditional dep" in line] == expected
    as_json = json.loads(cli("explain", "--recipes", recipes.dir, "--tags=cond", "--json").out)
    assert [d["tags"] for d in as_json["conditional_deps"]["cond"]] == ["get,thing", "get,tidy"]


def test_a_step_without_them_shows_none(cli: Callable[..., Any]) -> None:
    document = json.loads(cli("plan", "--tags=demo,sort", "--json").out)
    assert all(step["conditional_deps"] == [] for node in document["nodes"] for step in node["steps"])
    assert json.loads(cli("explain", "--tags=demo,sort", "--json").out)["conditional_deps"] == {}
