"""Plan-time template checks: every name a template reads must exist when it is rendered.

The resolver calls :func:`check_node_templates` once a node's deps and steps are known, and
:func:`check_dep_templates` before it renders a dep's ``with:``. A template that would
fail at run time (``{{ inputs.typo }}``, a dep skipped by its ``when``, a later step's
outputs, a fact nothing provides) is refused here with one line naming the file, line, key
and what to do, so ``cmx plan`` says OK only when the run cannot fail on its templates.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

from cmx_core.errors import ResolveError
from cmx_core.recipes.model import Recipe, StepSpec, dotted_key, line_of
from cmx_core.recipes.template import bound_problem, template_functions
from cmx_core.recipes.template_refs import Ref, template_info

#: Every name a step's or an output's template can read at run time (see execute.py).
RUN_NAMES = ("inputs", "variation", "variations", "facts", "deps", "steps", "node", "run")
#: A dep's ``with:`` is rendered at plan time, before anything runs.
PLAN_NAMES = ("inputs", "variation", "variations", "facts")
#: Jinja2's own globals.
JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})
_FIELDS = {"node": ("dir", "id"), "run": ("dir",)}

KeyPath = tuple[str | int, ...]
Found = tuple[tuple[str, KeyPath], ...]
"""Template strings with their key paths (``("steps", 0, "with", "cmd", 1)``)."""


dotted = dotted_key


class Scope(NamedTuple):
    """What the templates of one place in a resolved node may read."""

    names: tuple[str, ...]
    groups: Collection[str]
    facts: Collection[str]
    deps: Mapping[str, Collection[str]] = {}  # alias -> declared outputs of its recipe
    skipped_deps: Mapping[str, str] = {}  # alias -> why it is not in the plan
    steps: tuple[str, ...] = ()  # the step ids whose outputs exist when this renders
    kept: tuple[str, ...] = ()  # the ids of the node's steps whose when: holds, in order
    facts_file: str | None = None  # the --facts FILE the facts come from (None: this machine's detectors)


def check_node_templates(recipe: Recipe, scope: Scope, kept: tuple[str, ...],
                         steps_found: Sequence[Found] | None = None,
                         outputs_found: Sequence[tuple[str, Found]] | None = None) -> None:
    """Check each kept step's ``with:`` (seeing the earlier kept steps) and ``outputs.*.value``.
    ``steps_found`` (per step) and ``outputs_found`` are the recipe's templates as
    :func:`step_templates` and :func:`value_templates` find them (the resolver scans a recipe
    once); without them the recipe is scanned here."""
    if steps_found is None:
        steps_found = [step_templates(step) for step in recipe.steps]
    if outputs_found is None:
        outputs_found = [(name, value_templates(spec.value, ("outputs", name, "value")))
                         for name, spec in recipe.outputs.items() if spec.value is not None]
    position = 0
    for step, found in zip(recipe.steps, steps_found, strict=True):
        if position < len(kept) and kept[position] == step.id:
            position += 1
            if found:
                _check(recipe, found, scope._replace(steps=kept[:position - 1], kept=kept))
    for _name, found in outputs_found:
        if found:
            _check(recipe, found, scope._replace(steps=kept, kept=kept))


def check_node_bounds(recipe: Recipe, found: Iterable[Found], known: Mapping[str, object]) -> None:
    """Refuse a template that would pass a size or loop bound when the run renders it
    (``range(10**9)``, ``'x' * 10**9``), with what the plan knows (``known``)."""
    for templates in found:
        for text, where in templates:
            problem = bound_problem(text, known)
            if problem:
                raise _error(recipe, where, problem)


def step_templates(step: StepSpec) -> Found:
    """The template strings of a step's ``with:``, with their key paths."""
    return value_templates(step.with_, ("steps", step.index, "with")) if step.with_ else ()


def value_templates(value: object, keypath: KeyPath) -> Found:
    """The template strings inside ``value`` (found at ``keypath``), with their key paths."""
    return tuple(_templates(value, keypath, []))


def check_dep_templates(recipe: Recipe, value: object, keypath: KeyPath, scope: Scope) -> None:
    """Check a dep's ``with:``, which is rendered at plan time."""
    if value:
        check_value(recipe, value, keypath, scope._replace(names=PLAN_NAMES))


def check_value(recipe: Recipe, value: object, keypath: KeyPath, scope: Scope) -> None:
    """Check every template inside ``value`` (found at ``keypath``) against ``scope``."""
    _check(recipe, _templates(value, keypath, []), scope)


def _check(recipe: Recipe, found: Sequence[tuple[str, KeyPath]], scope: Scope) -> None:
    for text, where in found:
        info = template_info(text)
        if info.error:
            raise _error(recipe, where, f"{info.error} in {text!r}")
        for ref in info.refs:
            problem = _problem(recipe, ref, scope)
            if problem:
                raise _error(recipe, where, f"{text!r} reads {_dotted_ref(ref)}, {problem}")


def _templates(value: object, keypath: KeyPath, found: list[tuple[str, KeyPath]]) -> list[tuple[str, KeyPath]]:
    """Every template string inside ``value`` with its key path, appended to ``found`` (a key
    path is built only for a template or a nested container, not for every plain leaf)."""
    if value.__class__ is str:
        if "{{" in value or "{%" in value:
            found.append((value, keypath))
        return found
    if isinstance(value, Mapping):
        items: Iterable[tuple[str | int, object]] = ((str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return found
    for key, item in items:
        if item.__class__ is str:
            if "{{" in item or "{%" in item:
                found.append((item, (*keypath, key)))
        elif isinstance(item, (Mapping, list, tuple)):
            _templates(item, (*keypath, key), found)
    return found


def _problem(recipe: Recipe, ref: Ref, scope: Scope) -> str | None:
    """Why reading ``ref`` would fail at run time, with what to do; None if it is fine."""
    root = str(ref[0])
    if root not in scope.names:
        if root in JINJA_GLOBALS or root in template_functions():
            return None
        if root in RUN_NAMES:
            return f"which is not known yet when a dep's with: is rendered (it may read: {', '.join(scope.names)})"
        return _unknown("which is not a template name", root, scope.names, "names")
    if len(ref) < 2 or root == "variations":
        return None
    key = ref[1]
    if root == "inputs":
        return _member(key, recipe.inputs, "which the recipe does not declare", "inputs", "inputs")
    if root == "variation":
        return _member(key, scope.groups, "which is not a variation group of the recipe", "groups", "variation",
                       "; an ungrouped variation is tested with 'NAME' in variations")
    if root == "facts":
        if scope.facts_file is not None:
            return _member(key, scope.facts, f"which the facts file {scope.facts_file} does not hold", "facts",
                           "facts", f"; detect it into the file where it runs: cmx detect --json > {scope.facts_file} "
                           "(cmx detect --only NAME shows one fact)")
        return _member(key, scope.facts, "which no loaded detector provides", "facts", "facts",
                       "; install the plugin that detects it or pass --facts FILE")
    if root in _FIELDS:
        return _member(key, _FIELDS[root], f"but {root} has only", "", root)
    if root == "deps":
        return _dep_problem(ref, scope)
    return _step_problem(recipe, str(key), scope)


def _dep_problem(ref: Ref, scope: Scope) -> str | None:
    alias = str(ref[1])
    if alias in scope.skipped_deps:
        return f"but dep '{alias}' is not in the plan: {scope.skipped_deps[alias]}; guard it with " \
               f"'deps.{alias} is defined' or give the step the same when:"
    if alias not in scope.deps:
        return _member(alias, scope.deps, "which is not a dep alias of the recipe", "deps", "deps",
                       "; set 'as:' on the dep")
    if len(ref) < 3:
        return None
    outputs = scope.deps[alias]
    return _member(ref[2], outputs, f"which dep '{alias}' does not declare in its outputs:", "", f"deps.{alias}")


def _step_problem(recipe: Recipe, step_id: str, scope: Scope) -> str | None:
    if step_id in scope.steps:
        return None
    if step_id in scope.kept:
        why = "it is this step" if scope.kept.index(step_id) == len(scope.steps) else "it runs later"
        return f"but step '{step_id}' has no outputs yet: {why}"
    if any(s.id == step_id for s in recipe.steps):
        return f"but step '{step_id}' does not run: it is skipped by its when:"
    return _member(step_id, scope.steps, "which is not an earlier step's id", "earlier steps", "steps")


def _member(key: str | int, known: Collection[str], problem: str, label: str, prefix: str,
            hint: str = "") -> str | None:
    if key in known:
        return None
    listed = ", ".join(sorted(known)) or "none"
    shown = f"{problem} {listed}" if not label else f"{problem} ({label}: {listed})"
    return shown + hint + _did_you_mean(str(key), known, prefix)


def _unknown(problem: str, name: str, known: Collection[str], label: str) -> str:
    return f"{problem} ({label}: {', '.join(known)})" + _did_you_mean(name, known, "")


def _did_you_mean(name: str, known: Collection[str], prefix: str) -> str:
    close = difflib.get_close_matches(name, [str(k) for k in known], n=1)
    return f"; did you mean {prefix + '.' if prefix else ''}{close[0]}?" if close else ""


def _dotted_ref(ref: Ref) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(ref))


class PlanCheckError(ResolveError):
    """A template or a step argument that would fail at run time, found by the plan."""


def _error(recipe: Recipe, keypath: KeyPath, message: str) -> PlanCheckError:
    line = line_of(recipe.path, keypath)
    return PlanCheckError(f"{recipe.path}{f':{line}' if line else ''}: {dotted(keypath)}: {message}")
