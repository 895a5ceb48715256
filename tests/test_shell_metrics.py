"""A shell step's ``metrics:`` are read from its stdout by regex, JSON lines or KEY=VALUE lines;
a missing one fails the step, a malformed declaration is a plan-time error (#18 item 5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

RECIPE = """
name: m
tags: [m]
summary: metrics from stdout
cache: false
steps:
  - uses: shell
    with:
      cmd: ["printf", "{out}"]
      metrics:
{metrics}
"""


def _run(cli: Callable[..., Any], recipes: Any, out: str, metrics: str, *extra: str) -> Any:
    recipes("m", RECIPE.format(out=out, metrics=metrics))
    return cli("run", "--recipes", str(recipes.dir), "--tags=m", *extra)


def test_json_lines_and_kv(cli: Callable[..., Any], recipes: Any) -> None:
    out = r'log line\n{\"qps\": 12.5}\n{\"qps\": 1234567.25, \"other\": 1}\nITEMS=200000\n'
    metrics = ("        qps: {json: qps, unit: queries/s, higher_is_better: true}\n"
               "        items: {kv: ITEMS, unit: items}")
    result = _run(cli, recipes, out, metrics, "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["metrics"]["qps"] == {"value": 1234567.25, "unit": "queries/s", "higher_is_better": True}
    assert doc["metrics"]["items"] == {"value": 200000.0, "unit": "items", "higher_is_better": False}
    assert doc["benchmark"]["primary_metric"] == "qps"
    text = _run(cli, recipes, out, metrics).out
    assert "1,234,567.2 queries/s" in text and "200,000.0 items" in text


def test_regex_group(cli: Callable[..., Any], recipes: Any) -> None:
    result = _run(cli, recipes, r"took 1,024 ms\n", "        took_ms: {regex: 'took ([0-9,]+) ms', unit: ms}",
                  "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["metrics"]["took_ms"]["value"] == 1024.0


def test_missing_metric_fails_the_step(cli: Callable[..., Any], recipes: Any) -> None:
    result = _run(cli, recipes, r"nothing here\n", "        x: {kv: X, unit: s}")
    assert result.code == 1
    assert "metric x: stdout has no value for kv 'X'" in result.err


def test_two_sources_are_refused(cli: Callable[..., Any], recipes: Any) -> None:
    result = _run(cli, recipes, r"a\n", "        x: {regex: 'a', kv: X, unit: s}")
    assert result.code == 2, result.err
    assert "metrics.x: give exactly one of regex, json or kv (got regex, kv)" in result.err


@pytest.mark.parametrize("metrics", [
    "        x: {regex: 'a'}",
    "        x: {regex: 'a', unit: s, colour: red}",
])
def test_malformed_declaration_is_refused(cli: Callable[..., Any], recipes: Any, metrics: str) -> None:
    result = _run(cli, recipes, r"a\n", metrics)
    assert result.code == 2, result.err
    assert "metrics" in result.err and len(result.err_lines) == 1
