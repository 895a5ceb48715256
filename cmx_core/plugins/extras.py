"""Extras a step type needs (``StepType.extras``), checked when the plan is made.

A plugin distribution declares optional dependencies (``[project.optional-dependencies]
llm = [...]``); a step type that needs them says ``extras=("llm",)``, or its own
``check_plan`` calls :func:`require_extra` for what an input selects (a SUT, say). A missing
requirement is a one-line UsageError naming the extra and the command that installs it::

    step type 'mlperf.loadgen' needs the extra 'llm' of cmx-mlperf (transformers is not
    installed): cmx plugins install 'cmx-mlperf[llm]'
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

from cmx_core.errors import UsageError


class MissingExtra(UsageError):
    """A plan needs a distribution extra that is not installed (the message says how to get it)."""


def missing_requirements(distribution: str, extra: str) -> list[str]:
    """The requirements of ``distribution[extra]`` that are absent or outside their range; a
    distribution that is not installed or lacks the extra is a UsageError."""
    from importlib import metadata  # deferred: a plan whose steps need no extra never reads metadata

    from packaging.requirements import Requirement  # deferred: packaging only when this runs (33 modules)

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise UsageError(f"distribution {distribution} is not installed, so its extra '{extra}' cannot be "
                         "checked") from None
    declared = {_norm(x) for x in dist.metadata.get_all("Provides-Extra") or []}
    if _norm(extra) not in declared:
        raise UsageError(f"{distribution} has no extra '{extra}' (it has: {', '.join(sorted(declared)) or 'none'})")
    missing = []
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or not req.marker.evaluate({"extra": _norm(extra)}) or req.marker.evaluate({"extra": ""}):
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{req.name} is not installed")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            missing.append(f"{req.name} {version} is installed, {req.name}{req.specifier} is needed")
    return missing


def extra_requirements(distribution: str, extra: str) -> list[str]:
    """The requirements ``distribution[extra]`` adds, as written (``optuna>=5``)."""
    from importlib import metadata  # deferred: as in missing_requirements

    from packaging.requirements import Requirement  # deferred: packaging only when this runs (33 modules)

    found = []
    for text in metadata.distribution(distribution).requires or []:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": _norm(extra)}) \
                and not req.marker.evaluate({"extra": ""}):
            found.append(f"{req.name}{req.specifier}")
    return found


def require_extra(distribution: str, extra: str, needed_by: str) -> None:
    """Raise a UsageError naming the extra and its install command when ``distribution[extra]``
    is not fully installed; ``needed_by`` says who needs it (``step type 'mlperf.loadgen'``)."""
    from cmx_core.plugins.install import shell_line  # deferred: start-up: pulls packaging (37 modules)

    missing = missing_requirements(distribution, extra)
    if missing:
        # cmx-core is no plugin of the registry: its extra's requirements go in with pip
        command = shell_line([sys.executable, "-m", "pip", "install", *extra_requirements(distribution, extra)]
                             if distribution == "cmx-core" else
                             ["cmx", "plugins", "install", f"{_display(distribution)}[{extra}]"])
        raise MissingExtra(f"{needed_by} needs the extra '{extra}' of {_display(distribution)} "
                         f"({'; '.join(missing)}): {command}")


def plan_extra_problems(plan: Any, registry: Any) -> Iterator[str]:
    """For ``cmx plan`` and a run: one message per plan step whose step type's extras are not
    installed (each step type once)."""
    seen: set[tuple[str, str]] = set()
    for node in plan.nodes:
        for step in node.steps:
            provider = registry.steps.get(step.uses)
            if provider is None:
                continue
            info = registry.plugins.get(provider.plugin)
            for extra in _step_extras(provider, step.with_):
                if (step.uses, extra) in seen:
                    continue
                seen.add((step.uses, extra))
                try:
                    require_extra(info.distribution if info else provider.plugin, extra,
                                  f"step type '{step.uses}' (recipe {node.recipe.name})")
                except UsageError as exc:
                    yield str(exc)


def _step_extras(provider: Any, with_: Any) -> tuple[str, ...]:
    """``extras`` plus what ``extras_for`` says the step's ``with:`` values need."""
    chosen = provider.extras_for(with_) if provider.extras_for is not None else ()
    return tuple(dict.fromkeys((*provider.extras, *chosen)))


def check_plan_extras(plan: Any, registry: Any) -> None:
    """:func:`plan_extra_problems` as an error: the first problem, and how many more."""
    problems = list(plan_extra_problems(plan, registry))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise MissingExtra(problems[0] + more)


def missing_module_hint(distribution: str, module: str) -> str:
    """For a step of ``distribution`` that raised ``ModuleNotFoundError: No module named
    'module'``: ``"; it comes with the extra 'llm': cmx plugins install 'cmx-mlperf[llm]'"``
    when one of the distribution's extras requires the distribution providing ``module``,
    else "". Never raises (it runs on an error path)."""
    from importlib import metadata  # deferred: an error path only

    # deferred: packaging only when this runs (33 modules)
    from packaging.requirements import InvalidRequirement, Requirement

    from cmx_core.plugins.install import shell_line  # deferred: start-up: pulls packaging (37 modules)

    try:
        dist = metadata.distribution(distribution)
        providers = {_norm(d) for d in metadata.packages_distributions().get(module.split(".")[0], [])}
    except Exception:  # noqa: BLE001 - an error path: no hint rather than a second error
        return ""
    wanted = providers | {_norm(module.split(".")[0])}
    for extra in dist.metadata.get_all("Provides-Extra") or []:
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if _norm(req.name) in wanted and req.marker is not None and req.marker.evaluate({"extra": _norm(extra)}) \
                    and not req.marker.evaluate({"extra": ""}):
                command = shell_line(["cmx", "plugins", "install", f"{_display(distribution)}[{extra}]"])
                return f"; it comes with the extra '{extra}' of {_display(distribution)}: {command}"
    return ""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _display(distribution: str) -> str:
    return _norm(distribution)
