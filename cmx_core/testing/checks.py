"""The kit's checks of a loaded plugin: each function returns one-line problems."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from cmx_core import __version__
from cmx_core.datautil import to_plain
from cmx_core.errors import CmxError
from cmx_core.facts.store import FactStore
from cmx_core.plugins.extras import MissingExtra
from cmx_core.recipes.load import load_recipe_file
from cmx_core.run import engine

FACT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
"""A fact a recipe can reach as ``facts.NAME`` in a template or a condition: no dot (a path
separator there) and no dash (a subtraction)."""


def own(registry: Any, kind: str, plugin: str) -> dict[str, Any]:
    """The providers of ``kind`` that ``plugin`` registered, by name."""
    return {n: p for n, p in getattr(registry, kind).items() if p.plugin == plugin}


def requirement_problems(dist: Any) -> list[str]:
    """The distribution must require cmx-core through a closed range holding this cmx-core."""
    name = dist.metadata["Name"]
    reqs = [Requirement(t) for t in dist.requires or []]
    core = [r for r in reqs if r.name.replace("_", "-").lower() == "cmx-core" and r.marker is None]
    if not core:
        return [f"{name} must depend on cmx-core with a version range (e.g. 'cmx-core>=0.1,<0.2')"]
    spec = core[0].specifier
    if not spec:
        return [f"{name} must depend on cmx-core with a version range, not '{core[0]}' (e.g. 'cmx-core>=0.1,<0.2')"]
    problems = []
    if not any(s.operator in ("<", "<=", "==", "~=", "===") for s in spec):
        problems.append(f"{name}: cmx-core requirement '{core[0]}' is open-ended; add an upper bound "
                        "(a 0.x minor release may change the plugin API: '>=0.N,<0.N+1')")
    if not spec.contains(__version__, prereleases=True):
        problems.append(f"{name} needs cmx-core{spec}, but cmx-core {__version__} is installed")
    return problems


def fact_name_problems(registry: Any, plugin: str) -> list[str]:
    """Detector names a recipe cannot reach as ``facts.NAME``."""
    return [f"detector '{name}': a fact name is [a-z][a-z0-9_]* (no '.' or '-'), or no recipe can reach "
            f"facts.{name}" for name in own(registry, "detectors", plugin) if not FACT_NAME.match(name)]


def detector_problems(registry: Any, plugin: str) -> list[str]:
    """Call each detector of ``plugin`` through a fresh fact store (the caller gives it a
    private cache): it must not fail, must return JSON data and, when it declares
    ``returns``, a value of that type."""
    problems: list[str] = []
    for name, detector in own(registry, "detectors", plugin).items():
        store = FactStore({name: detector}, use_cache=False)
        try:
            value = store.get(name)
        except Exception as exc:  # noqa: BLE001 - a CmxError from detect() is a finding too
            problems.append(f"detector '{name}' raised {type(exc).__name__}: {exc}")
            continue
        if name in store.errors:
            problems.append(f"detector '{name}' failed: {store.errors[name]} (detectors must not raise)")
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append(f"detector '{name}' returned what is not JSON data: {exc}")
        declared = detector.returns
        if declared is not None and not isinstance(value, declared):
            problems.append(f"detector '{name}' declares returns={_type_name(declared)} but returned "
                            f"{type(value).__name__}: {value!r:.80}")
    return problems


def _type_name(declared: type | tuple[type, ...]) -> str:
    if isinstance(declared, tuple):
        return "(" + ", ".join(t.__name__ for t in declared) + ")"
    return declared.__name__


def example_problems(registry: Any, plugin: str, samples: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Each step's ``examples`` and its sample's params against its ``params`` and
    ``params_schema`` (templated values are left to the plan)."""
    problems: list[str] = []
    for name, step in own(registry, "steps", plugin).items():
        examples = [(f"examples[{i}]", dict(e)) for i, e in enumerate(step.examples)]
        if name in samples:
            examples.append(("the kit sample", dict(samples[name])))
        for label, example in examples:
            problems += _one_example(name, step, label, example)
    return problems


def _one_example(name: str, step: Any, label: str, example: dict[str, Any]) -> list[str]:
    import jsonschema  # deferred: jsonschema only when this runs (47 modules)


    problems = []
    unknown = sorted(set(example) - set(step.params)) if step.params else []
    if unknown:
        problems.append(f"step '{name}' {label}: key '{unknown[0]}' is not one of its params "
                        f"({', '.join(sorted(step.params))})")
    if step.params_schema is None:
        return problems
    literal = {k: v for k, v in to_plain(example).items() if not (isinstance(v, str) and "{{" in v)}
    try:
        jsonschema.Draft202012Validator.check_schema(step.params_schema)
        jsonschema.validate(literal, step.params_schema)
    except jsonschema.SchemaError as exc:
        problems.append(f"step '{name}': params_schema is not a valid JSON Schema: {exc.message}")
    except jsonschema.ValidationError as exc:
        where = "/".join(map(str, exc.absolute_path)) or "with"
        problems.append(f"step '{name}' {label} breaks its params_schema at {where}: {exc.message}")
    return problems


def metric_value_problems(step: str, part: Any) -> list[str]:
    """Metric values must be finite numbers (or None with a reason elsewhere)."""
    problems = []
    for mname, metric in part.metrics.items():
        value = getattr(metric, "value", None)
        if isinstance(value, bool) or (value is not None and not isinstance(value, (int, float))):
            problems.append(f"step '{step}': metric '{mname}' value {value!r} is not a number")
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(f"step '{step}': metric '{mname}' is {value}; a metric is a finite number, "
                            "or null when it could not be measured")
    return problems


def recipe_files(registry: Any, plugin: str) -> list[Path]:
    """The recipe files in ``plugin``'s recipe directories."""
    found: list[Path] = []
    for name, directory in registry.recipe_paths:
        if name == plugin and Path(directory).is_dir():
            found += sorted(Path(directory).rglob("*.yaml"))
    return found


def required_inputs(path: Path, work: Path) -> dict[str, Any]:
    """Stand-in values for a recipe's required inputs that have no default, so the plan can be
    made: a directory under ``work`` for a path, a choice's first value, the minimum (or 1)
    for a number, ``"conformance"`` for a string. Give real ones with ``recipe_sample``."""
    values: dict[str, Any] = {}
    for name, spec in load_recipe_file(path).inputs.items():
        if not spec.required or spec.default is not None:
            continue
        if spec.type == "path":
            (work / name).mkdir(parents=True, exist_ok=True)
            values[name] = str(work / name)
        elif spec.type == "choice" and spec.choices:
            values[name] = spec.choices[0]
        elif spec.type in ("integer", "number"):
            values[name] = int(spec.min) if spec.min is not None and spec.type == "integer" else (spec.min or 1)
        elif spec.type == "boolean":
            values[name] = False
        else:
            values[name] = "conformance"
    return values


def plan_problems(path: Path, inputs: Mapping[str, Any], facts_file: Path | None) -> list[str]:
    """Plan the recipe of ``path`` by its name (through the current process-wide registry)
    with ``inputs`` and, when given, the fixture ``facts_file``."""
    try:
        recipe = load_recipe_file(path)
    except CmxError as exc:
        return [str(exc).splitlines()[0]]

    try:
        plan = engine.plan(",".join(recipe.tags), dict(inputs), facts_file=facts_file)
    except MissingExtra:  # installed without that extra: the plan rightly refuses, naming the install command
        return []
    except CmxError as exc:
        return [f"{path}: recipe '{recipe.name}' does not plan: {str(exc).splitlines()[0]}"]
    if plan.root.recipe.name != recipe.name:
        return [f"{path}: its tags {','.join(recipe.tags)} select recipe '{plan.root.recipe.name}', "
                f"not '{recipe.name}'"]
    return []
