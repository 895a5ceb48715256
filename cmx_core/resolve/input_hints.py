"""One-line messages for a ``--KEY=VALUE`` on the command line that is neither an option of
the command nor an input of the recipe: a misspelt option (``--jbos 2``) is reported as an
unknown option with the option it is close to, not as a problem of the recipe's inputs."""

from __future__ import annotations

from collections.abc import Collection

from cmx_core.errors import did_you_mean
from cmx_core.recipes.model import CLI_RESERVED_INPUTS

HIDDEN = frozenset({"input", "sweep_point", "plan_on_stdin"})
"""Reserved names that are no option a user types."""

COMMAND_LINE = "--input"
"""The origin the resolver gives inputs from the command line."""


def option_names() -> list[str]:
    """The run options as typed: ``--no-cache``, ``--jobs``, ..."""
    return sorted(f"--{name.replace('_', '-')}" for name in CLI_RESERVED_INPUTS - HIDDEN)


def unknown_input(key: str, recipe: str, inputs: Collection[str], origin: str) -> str:
    """The error for input ``key`` that recipe ``recipe`` (with ``inputs``) does not declare."""
    known = ", ".join(sorted(inputs)) or "none"
    input_hint = did_you_mean(key, inputs)
    if origin != COMMAND_LINE:
        return f"{origin}: unknown input '{key}' for recipe {recipe}{input_hint} (its inputs: {known})"
    typed = f"--{key.replace('_', '-')}"
    option_hint = "" if input_hint else did_you_mean(typed, option_names(), n=2)
    if option_hint:
        return (f"unknown option '{typed}'{option_hint}, and unknown input '{key}' for recipe {recipe} "
                f"(its inputs: {known})")
    return f"unknown option '{typed}': unknown input '{key}' for recipe {recipe}{input_hint} (its inputs: {known})"


def unknown_flag(arg: str) -> str:
    """The error for a bare ``--flag`` without a value that is no option of the command."""
    name = arg.split("=", 1)[0]
    return (f"unknown option '{name}'{did_you_mean(name, option_names(), n=2)}; recipe inputs are given as "
            "--KEY=VALUE or --KEY VALUE")
