"""Hooks of the cmx-helm test plugin: the ``helm`` suite, the ``helm.eval`` step, a recipe.

The step scores a fake scenario. The scenario ``broken`` makes it emit a section that
breaks the suite's own schema (``scenario`` is a number), so the tests can watch cmx refuse
it and name this plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.api import (
    Metric,
    ResultPart,
    StepContext,
    StepOutput,
    StepType,
    Suite,
    hookimpl,
)

SECTION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["scenario", "instances"],
    "additionalProperties": False,
    "properties": {
        "scenario": {"type": "string", "minLength": 1},
        "instances": {"type": "integer", "minimum": 0},
        "per_instance": {"type": "array", "items": {"$ref": "#/$defs/instance"}},
    },
    "$defs": {
        "instance": {
            "type": "object",
            "required": ["id", "correct"],
            "properties": {"id": {"type": "string"}, "correct": {"type": "boolean"}},
        }
    },
}
SUITE = Suite(name="helm", summary="HELM scenarios (test plugin)", section="helm",
              schema=SECTION_SCHEMA)


def evaluate(ctx: StepContext) -> StepOutput:
    scenario = str(ctx.params["scenario"])
    answers = [True, True, False, True]
    section: dict[str, Any] = {
        "scenario": 42 if scenario == "broken" else scenario,
        "instances": len(answers),
        "per_instance": [{"id": f"q{i}", "correct": ok} for i, ok in enumerate(answers)],
    }
    part = ResultPart(
        status="valid",
        benchmark={"suite": "helm", "suite_version": "1.0", "task": scenario,
                   "primary_metric": "exact_match"},
        metrics={"exact_match": Metric(sum(answers) / len(answers), "fraction", True),
                 "instances": Metric(len(answers), "count", True)},
        sections={"helm": section},
    )
    return StepOutput(outputs={"scenario": scenario}, result=part)


@hookimpl
def cmx_register_suites(register: Callable[[Suite], None]) -> None:
    register(SUITE)


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(name="helm.eval", summary="Score a HELM scenario (fake)", run=evaluate,
                      params={"scenario": "scenario name"}, measures=True))


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
