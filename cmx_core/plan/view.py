"""What ``cmx plan`` shows beyond the DAG: each step's settings rendered as far as they can be
before anything runs, and how the chosen executor would run the plan (for a container: the
image tag, the GPUs requested, the mounts, the network and the limits).

A template over inputs, variations and facts is rendered with the real values. What only
the run knows (a dep's outputs, an earlier step's outputs, the node's and the run's
directories) is shown as a placeholder such as ``<deps.model.path>``; a template that cannot
be rendered with placeholders in it is shown as written. A dep that a step runs itself,
decided at run time, is listed under that step as a ``conditional dep``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmx_core.errors import CmxError, escape_controls
from cmx_core.facts.store import FactStore
from cmx_core.plan.conditional import ByStep, conditional_deps
from cmx_core.plan.facts_view import FactsView, groups_of
from cmx_core.plan.planner import Plan, PlanNode
from cmx_core.providers.types import StepType
from cmx_core.recipes.model import StepSpec
from cmx_core.recipes.template import render_value


class Unknown:
    """A value only the run knows; renders as ``<path>`` and lets templates reach into it."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> Unknown:
        if name.startswith("_"):
            raise AttributeError(name)
        return Unknown(f"{self._path}.{name}")

    def __getitem__(self, key: Any) -> Unknown:
        return Unknown(f"{self._path}[{key!r}]")

    def __str__(self) -> str:
        return f"<{self._path}>"

    __repr__ = __str__


@dataclass(frozen=True)
class PlanView:
    """A plan with its rendered step settings and its executor's description."""

    plan: Plan
    executor: str
    execution: Mapping[str, Any] = field(default_factory=dict)
    steps: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """node id -> step id -> the rendered ``with:``."""
    conditional: ByStep = field(default_factory=dict)
    """node id -> step id -> the deps that step runs itself, decided at run time."""

    def to_json(self) -> dict[str, Any]:
        document = self.plan.to_json()
        for node in document["nodes"]:
            for step in node["steps"]:
                step["rendered"] = _plain(self.steps.get(node["id"], {}).get(step["id"]))
                step["conditional_deps"] = [d.to_json() for d in self.conditional.get(node["id"], {})
                                            .get(step["id"], ())]
        document["executor"] = {"name": self.executor, **_plain(dict(self.execution))}
        return document

    def render_text(self) -> str:
        def detail(node: PlanNode, step: StepSpec) -> list[str]:
            rendered = self.steps.get(node.id, {}).get(step.id) or {}
            lines = [f"{key}: {_show(value)}" for key, value in rendered.items()]
            return lines + [f"conditional dep {d.describe()}"
                            for d in self.conditional.get(node.id, {}).get(step.id, ())]

        lines = [self.plan.render_tree(detail), f"executor: {self.executor}"]
        lines += [f"    {key}: {_show(value)}" for key, value in self.execution.items()]
        return escape_controls("\n".join(lines))  # it quotes recipe text and inputs


def view(plan: Plan, facts: FactStore, executor: str, execution: Mapping[str, Any],
         step_types: Mapping[str, StepType] | None = None) -> PlanView:
    """The plan's view: every step's ``with:`` rendered as far as the plan allows, and the
    deps each step runs itself, decided at run time (from ``step_types``)."""
    steps = {node.id: {step.id: preview_params(node, step.with_, facts) for step in node.steps}
             for node in plan.nodes}
    return PlanView(plan, executor, execution, steps, conditional_deps(plan, step_types or {}))


def preview_params(node: PlanNode, params: Mapping[str, Any], facts: FactStore) -> dict[str, Any]:
    """``params`` rendered with the node's inputs, variations and facts, and placeholders
    for what only the run knows; a value that cannot be rendered so stays as written."""
    context = {
        "inputs": node.inputs, "variation": groups_of(node), "variations": list(node.variations),
        "facts": FactsView(facts), "deps": {alias: Unknown(f"deps.{alias}") for alias in node.deps},
        "steps": Unknown("steps"), "node": Unknown("node"), "run": Unknown("run"),
    }
    rendered = {}
    for key, value in params.items():
        try:
            rendered[key] = render_value(value, context, f"{node.recipe.path}: with.{key}")
        except (CmxError, TypeError, ValueError, AttributeError):
            rendered[key] = value
    return rendered


def _plain(value: Any) -> Any:
    if isinstance(value, Unknown):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _show(value: Any) -> str:
    plain = _plain(value)
    return plain if isinstance(plain, str) else json.dumps(plain, default=str)
