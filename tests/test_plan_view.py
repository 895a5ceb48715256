"""`cmx plan` shows each step's settings rendered as far as the plan allows, and how the
executor would run the plan."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECIPE = """
name: viewed
tags: [viewed]
summary: settings over inputs, facts, a dep and an earlier step
inputs:
  n: {type: integer, default: 3}
deps:
  - {tags: [demo, data], as: data, with: {size: 10}}
steps:
  - uses: shell
    id: first
    with: {cmd: [echo, "{{ inputs.n * 2 }}", "{{ facts.os.name }}", "{{ deps.data.path }}"]}
  - uses: shell
    with: {cmd: [cat, "{{ steps.first.stdout_path }}", "{{ node.dir }}/x"]}
"""


def test_plan_renders_what_it_can_and_marks_what_only_the_run_knows(cli: Callable[..., Any],
                                                                   recipes: Callable[[str, str], Path]) -> None:
    recipes("viewed", RECIPE)
    result = cli("plan", "--tags=viewed", "--recipes", str(recipes.dir), "--json")  # type: ignore[attr-defined]
    assert result.code == 0, result.err
    document = json.loads(result.out)
    node = next(n for n in document["nodes"] if n["id"] == "viewed")
    first, second = (step["rendered"] for step in node["steps"])
    assert first["cmd"][:2] == ["echo", 6]  # a number stays a number
    assert first["cmd"][2] not in ("", "{{ facts.os.name }}")  # the real fact
    assert first["cmd"][3] == "<deps.data.path>"
    assert second["cmd"] == ["cat", "<steps.first.stdout_path>", "<node.dir>/x"]
    assert node["steps"][0]["with"]["cmd"][1] == "{{ inputs.n * 2 }}"  # the recipe's own text is kept
    assert document["executor"] == {"name": "local"}
    text = cli("plan", "--tags=viewed", "--recipes", str(recipes.dir))  # type: ignore[attr-defined]
    assert 'cmd: ["echo", 6, ' in text.out and "executor: local" in text.out
