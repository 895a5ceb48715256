"""What the resolver reads of a recipe that no node's inputs can change, worked out once.

Every node of a recipe walks the same steps and outputs: the template strings inside each
step's ``with:`` (for the plan-time template checks), the facts those templates name (they go
into the node's key), and whether the step's arguments passed its step type's schema. A
:class:`RecipeScan` holds them; :func:`scan_of` keeps one per recipe in the catalog that built
the recipe (``Catalog.scans``), so a session planning many nodes, or planning again, walks
each recipe's data once. What depends on a node (its scope, its facts' values) is still
checked per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmx_core.recipes.model import Recipe, StepSpec, VariationSpec
from cmx_core.recipes.template import fact_names
from cmx_core.recipes.template_checks import Found, step_templates, value_templates

if TYPE_CHECKING:
    from cmx_core.providers.types import StepType

@dataclass(slots=True)
class RecipeScan:
    """One recipe's templates and fact names, per step in file order; ``passed`` (position of
    a step -> the step type whose parameters its ``with:`` satisfied) fills in as nodes check
    their steps."""

    recipe: Recipe
    templates: tuple[Found, ...]
    facts: tuple[tuple[str, ...], ...]  # per step: the facts it reads or returns, sorted
    output_templates: tuple[tuple[str, Found], ...]  # (output name, its value's templates)
    output_facts: tuple[tuple[str, ...], ...]  # per output with a value: its facts, sorted
    groups: tuple[str, ...]  # the variation groups, in file order
    order: dict[str, int]  # variation spec name -> its position in the file
    default_variations: tuple[VariationSpec, ...]  # the non-parametric ones with default: true
    defaults: dict[str, Any] | None = None
    """The typed input defaults, once a node has coerced them (see :func:`fixed_defaults`)."""
    passed: dict[int, StepType] = field(default_factory=dict)


def scan_of(recipe: Recipe, scans: dict[int, RecipeScan]) -> RecipeScan:
    """The scan of ``recipe``, from ``scans`` (by identity: a rebuilt recipe is scanned anew)."""
    known = scans.get(id(recipe))
    if known is None or known.recipe is not recipe:
        known = scans[id(recipe)] = scan(recipe)
    return known


def scan(recipe: Recipe) -> RecipeScan:
    outputs = [(name, spec.value) for name, spec in recipe.outputs.items() if spec.value is not None]
    return RecipeScan(
        recipe,
        tuple(step_templates(step) for step in recipe.steps),
        tuple(tuple(sorted(fact_names(step.with_) | facts_step_names(step))) for step in recipe.steps),
        tuple((name, value_templates(value, ("outputs", name, "value"))) for name, value in outputs),
        tuple(tuple(sorted(fact_names(value))) for _name, value in outputs),
        tuple(recipe.groups()),
        {name: i for i, name in enumerate(recipe.variations)},
        tuple(var for var in recipe.variations.values() if var.default and not var.parametric),
    )


_FIXED = frozenset({str, int, float, bool})


def fixed_defaults(recipe: Recipe, values: dict[str, Any]) -> bool:
    """Whether coerced defaults ``values`` may be reused by every node of ``recipe``: plain
    scalars, and no ``path`` input (its ``~`` expands with the environment of the moment)."""
    return all(spec.type != "path" for spec in recipe.inputs.values()) and \
        all(value.__class__ in _FIXED for value in values.values())


def facts_step_names(step: StepSpec) -> set[str]:
    """The facts a built-in ``cmx.facts`` step returns: they belong in the node's key."""
    if step.uses != "cmx.facts":
        return set()
    names = step.with_.get("names") or []
    return {names} if isinstance(names, str) else {str(n) for n in names if isinstance(n, str)}
