"""``--env.KEY=VALUE`` on the command line: CM/MLC users set any env key of a script this way.

cmx steps see only what their recipe allows, so the arguments go to the one input a step type
names for them (:attr:`StepType.env_input`, cmx-cm's ``cm_env``), merged into its JSON object;
a recipe with no such step refuses them in one line that says what to do instead."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cmx_core.errors import CmxError, UsageError
from cmx_core.providers.types import StepType
from cmx_core.recipes.model import Recipe

ENV_PREFIX = "env."
"""How ``parse_inputs`` keeps an ``--env.KEY=VALUE`` argument: the input ``env.KEY``."""


def env_input_of(recipe: Recipe, step_lookup: Callable[[str], StepType] | None) -> str:
    """The input of ``recipe`` that takes ``--env.`` arguments ('' when none does)."""
    if step_lookup is None:
        return ""
    for step in recipe.steps:
        try:
            name = step_lookup(step.uses).env_input
        except CmxError:  # an unknown step type is reported by the step checks, not here
            continue
        if name and name in recipe.inputs:
            return name
    return ""


def fold_env_args(recipe: Recipe, raw: Mapping[str, Any], step_lookup: Callable[[str], StepType] | None
                  ) -> dict[str, Any]:
    """``raw`` with its ``env.KEY`` entries merged into the recipe's env input (over any JSON
    object already given there); unchanged when it has none."""
    env = {k[len(ENV_PREFIX):]: str(v) for k, v in raw.items() if k.startswith(ENV_PREFIX)}
    if not env:
        return dict(raw)
    first = next(iter(env.items()))
    typed = f"--{ENV_PREFIX}{first[0]}={first[1]}"
    if "" in env:
        raise UsageError(f"'--{ENV_PREFIX}={env['']}': expected --env.KEY=VALUE")
    target = env_input_of(recipe, step_lookup)
    if not target:
        raise UsageError(f"{typed!r}: recipe {recipe.name} runs no step that takes env keys on the command line "
                         "(only bridged CM/MLC scripts do: a cm.script step); declare an input, or list the "
                         "variable under the shell step's env_allow: and export it")
    out = {k: v for k, v in raw.items() if not k.startswith(ENV_PREFIX)}
    given = out.get(target, "{}")
    try:
        merged = json.loads(given) if isinstance(given, str) else dict(given)
    except (ValueError, TypeError):
        merged = None
    if not isinstance(merged, dict):
        raise UsageError(f"--{target}={given!r}: expected a JSON object of env keys (as --env.KEY=VALUE sets)")
    merged.update(env)
    out[target] = json.dumps(merged, sort_keys=True)
    return out
