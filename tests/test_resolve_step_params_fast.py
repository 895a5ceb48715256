"""The step-parameter check compiled once per schema agrees with the wording validator: on
every step of every recipe cmx ships, and on mutations of their arguments (wrong types,
templates, unknown keys), the compiled check passes exactly the values the validator finds
no problem in, so a plan's verdicts and messages are the ones they were."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cmx_core.recipes.model import Recipe, StepSpec
from cmx_core.resolve.step_params import _fast_check, _is_supported, _Validator
from cmx_core.run import engine

MUTANTS: list[Any] = [1, 2.5, True, None, "", "x", "{{ inputs.n }}", "a {{ node.dir }}", [], ["a", 1], {}, {"k": "v"}]


def mutations(value: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield dict(value)
    yield {**value, "no_such_parameter": 1}
    for key in value:
        rest = {k: v for k, v in value.items() if k != key}
        yield rest
        for mutant in MUTANTS:
            yield {**value, key: mutant}
            if isinstance(value[key], list) and value[key]:
                yield {**value, key: [mutant, *value[key][1:]]}


def shipped_steps() -> list[tuple[Recipe, StepSpec, Mapping[str, Any]]]:
    session = engine.open_session([])
    found = []
    for recipe in session.catalog.recipes.values():
        for step in recipe.steps:
            step_type = session.registry.steps.get(step.uses)
            schema = step_type.params_schema if step_type is not None else None
            if schema and _is_supported(schema):
                found.append((recipe, step, schema))
    any_recipe = next(iter(session.catalog.recipes.values()))
    for name, step_type in session.registry.steps.items():  # every step type, e.g. shell
        schema = step_type.params_schema
        if schema and _is_supported(schema):
            example = {key: ["echo", "x"] for key in schema.get("properties") or {}}
            found.append((any_recipe, StepSpec(index=0, id="s", uses=name, with_=example), schema))
    return found


def test_compiled_check_agrees_with_the_validator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))
    steps = shipped_steps()
    assert len({step.uses for _r, step, _s in steps}) >= 2, [step.uses for _r, step, _s in steps]
    compared = passed = 0
    for recipe, step, schema in steps:
        for value in mutations(step.with_):
            fast = _fast_check(schema)(value, recipe)
            problem = _Validator(recipe, step.uses).check(value, schema, ("steps", step.index, "with"))
            assert fast == (problem is None), (recipe.name, step.uses, value, problem)
            compared += 1
            passed += fast
    assert passed and compared - passed  # both verdicts were exercised


def test_compiled_once_per_schema() -> None:
    schema = {"type": "object", "properties": {"cmd": {"type": "array", "items": {"type": "string"}}},
              "additionalProperties": False}
    assert _fast_check(schema) is _fast_check(schema)
    other = dict(schema)
    assert _fast_check(other) is not _fast_check(schema)
