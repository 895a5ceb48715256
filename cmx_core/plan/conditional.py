"""The deps a plan's steps run themselves, each decided at run time (see
:class:`cmx_core.providers.types.ConditionalDep`): neither planned as nodes nor dropped, so
``cmx plan`` and ``cmx explain`` show them as conditional, under the step that runs them."""

from __future__ import annotations

from collections.abc import Mapping

from cmx_core.plan.planner import Plan
from cmx_core.providers.types import ConditionalDep, StepType

ByStep = dict[str, dict[str, tuple[ConditionalDep, ...]]]
"""node id -> step id -> the step's conditional deps (only steps that have some)."""


def conditional_deps(plan: Plan, step_types: Mapping[str, StepType]) -> ByStep:
    """Each step's conditional deps, as its step type reads them from the unrendered ``with:``."""
    found: ByStep = {}
    for node in plan.nodes:
        for step in node.steps:
            step_type = step_types.get(step.uses)
            if step_type is None or step_type.conditional_deps is None:
                continue
            deps = tuple(step_type.conditional_deps(step.with_))
            if deps:
                found.setdefault(node.id, {})[step.id] = deps
    return found


def of_node(found: ByStep, node_id: str) -> tuple[ConditionalDep, ...]:
    """A node's conditional deps, over all its steps, in step order."""
    return tuple(dep for deps in found.get(node_id, {}).values() for dep in deps)
