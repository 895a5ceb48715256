"""cmx-cm's hook implementations: the ``cm.script`` step type, the ``cmx import cm`` command
and, when ``CMX_CM_PATH`` names collections, their live translation as a recipe source; a
CM/MLC repository added with ``cmx repo add`` is translated the same way (``cmx_repo_recipes``).

Importing this module loads the step's parameters; the collection translator and the CLI are
imported when used (a run of a recipe that is not CM's never loads them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_cm.cache_check import still_valid
from cmx_cm.hooks_view import conditional_deps
from cmx_cm.step import PARAMS, run_script
from cmx_core.api import Capabilities, Command, StepContext, StepOutput, StepType, cache_dir, hookimpl

PLUGIN = "cmx-cm"


def _run_script(ctx: StepContext) -> StepOutput:
    return run_script(ctx)


def _params() -> dict[str, str]:
    return PARAMS


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(name="cm.script", summary="Run an imported CM/MLC script (customize.py + run.sh)",
                      run=_run_script, params=_params(), validate=still_valid, conditional_deps=conditional_deps,
                      env_input="cm_env", capabilities=Capabilities(runs_untrusted_code=False), plugin=PLUGIN))


@hookimpl
def cmx_register_commands(register: Callable[[Command], None]) -> None:
    register(Command(name="import.cm",
                     summary="Import a CM/CMX or MLC script collection as cmx recipes (import cm DIR)",
                     configure=_configure, run=_run, plugin=PLUGIN))
    register(Command(name="cm", summary="CM's command line over imported scripts (cm run script --tags=... "
                                        "--env.KEY=VALUE)", configure=_configure_cm, run=_run_cm, plugin=PLUGIN))


def _configure_cm(parser: Any) -> None:
    from cmx_cm.cm_cli import configure  # deferred: start-up: the translator, for 'cmx cm' only

    configure(parser)


def _run_cm(args: Any) -> int:
    from cmx_cm.cm_cli import run  # deferred: start-up: as in _configure_cm

    return run(args)


def _configure(parser: Any) -> None:
    from cmx_cm.cli import configure  # deferred: start-up: 4 modules not needed to start cmx

    configure(parser)


def _run(args: Any) -> int:
    from cmx_cm.cli import run  # deferred: start-up: 4 modules not needed to start cmx

    return run(args)


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    """The live translations of the collections in ``CMX_CM_PATH`` (none when unset)."""
    value = os.environ.get("CMX_CM_PATH", "")
    if not value.strip():
        return []
    from cmx_cm.collection import live_paths  # deferred: start-up: the translator, when CMX_CM_PATH is set

    return live_paths(value, cache_dir())


@hookimpl
def cmx_repo_recipes(tree: Path) -> list[Path] | None:
    """A CM/MLC repository added with ``cmx repo add``: its translation (docs/repos.md)."""
    from cmx_cm.collection import repo_recipe_dirs  # deferred: start-up: the translator, for an added repo

    return repo_recipe_dirs(tree, cache_dir())
