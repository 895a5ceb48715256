"""Variation names may hold dots (``bert-99.9``, ``for.resnet50``, as CM and MLC name them);
the exact name is chosen before a parametric ``stem.#``; a parametric stem has no dot."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

RECIPE = """
name: dotted
tags: [dotted]
summary: dotted variation names
variations:
  bert-99.9: {inputs: {chosen: exact}}
  for.resnet50: {inputs: {chosen: for-resnet50}}
  for.#: {inputs: {chosen: parametric}}
inputs:
  chosen: {type: string, default: none}
steps:
  - {uses: shell, with: {cmd: ["true"]}}
"""


def _chosen(cli: Callable[..., Any], recipes: Any, tags: str) -> Any:
    result = cli("plan", "--recipes", str(recipes.dir), f"--tags={tags}", "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)["nodes"][0]


def test_dotted_names_are_chosen_exactly_before_a_parametric_stem(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("dotted", RECIPE)
    assert _chosen(cli, recipes, "dotted,bert-99.9")["inputs"]["chosen"] == "exact"
    assert _chosen(cli, recipes, "dotted,for.resnet50")["inputs"]["chosen"] == "for-resnet50"
    assert _chosen(cli, recipes, "dotted,for.bert")["inputs"]["chosen"] == "parametric"


def test_a_parametric_stem_with_a_dot_is_refused(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("bad", RECIPE.replace("for.#", "for.x.#").replace("name: dotted", "name: bad"))
    result = cli("plan", "--recipes", str(recipes.dir), "--tags=dotted", "--strict")
    assert result.code == 2 and "variations" in result.err and "for.x.#" in result.err
