"""cmx hook implementations of cmx-alebench: the ``alebench.evaluate`` step, the
``ale-bench`` suite with the schema of its ``ale_bench`` section, and the recipes.

Importing this module costs next to nothing: the judge loads when a step runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.api import Capabilities, Command, StepContext, StepOutput, StepType, Suite, hookimpl

SECTION_SCHEMA = Path(__file__).parent / "schemas" / "ale_bench.schema.json"

STEP_PARAMS: dict[str, str] = {
    "problem": "problem id (a directory with ALE-Bench's data.json under problems_dir, or a shipped one)",
    "problems": "lite: comma-separated problem ids, or 'all'",
    "problems_dir": "comma-separated folders holding problem directories, searched before the shipped ones",
    "code": "the solution's source file (lite: a file for every problem, or a folder of <problem_id>.<ext>)",
    "language": "python, cpp17, cpp20, cpp23 (where g++ has it) or rust",
    "mode": "public (the public cases) or private (the private cases, with rank and performance)",
    "lite": "use the lite seed lists and standings and judge a set of problems",
    "num_workers": "cases judged in parallel (at most the machine's cores)",
    "repeats": "evaluations of the same code (time-aware solutions score differently each time)",
    "judge": "sandbox (cmx's bubblewrap sandbox) or docker (a fresh container per call, as ALE-Bench)",
    "judge_image": "sandbox judge: the judge image (tag or ID) whose root filesystem the compile and every run use",
}


def _evaluate(ctx: StepContext) -> StepOutput:
    from cmx_alebench.step import run_step  # deferred: start-up: 73 modules not needed to start cmx

    return run_step(ctx)


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(StepType(name="alebench.evaluate",
                      summary="Judge a solution on ALE-Bench problems (public or private cases), rank and rate it",
                      run=_evaluate, params=STEP_PARAMS, measures=True,
                      capabilities=Capabilities(runs_untrusted_code=True)))


@hookimpl
def cmx_register_suites(register: Callable[[Suite], None]) -> None:
    register(Suite(name="ale-bench", summary="ALE-Bench: AtCoder-style heuristic problems, scored, ranked and rated",
                   section="ale_bench", schema=json.loads(SECTION_SCHEMA.read_text(encoding="utf-8")),
                   required_for=("valid", "invalid")))


def _configure(parser: Any) -> None:
    from cmx_alebench.cli import configure  # deferred: start-up: the command's module, for its own command only

    configure(parser)


def _configure_import(parser: Any) -> None:
    from cmx_alebench.cli import configure_import  # deferred: start-up: the command's module, for its own command only

    configure_import(parser)


def _run_command(args: Any) -> int:
    from cmx_alebench.cli import run  # deferred: start-up: the command's module, for its own command only

    return run(args)


@hookimpl
def cmx_register_commands(register: Callable[[Command], None]) -> None:
    register(Command(name="ale-bench", summary="ALE-Bench problem packages: import PATH... (zip or directory; "
                     "builds the Rust tools/ crate offline into the cmx cache)", configure=_configure,
                     run=_run_command))
    register(Command(name="import.ale-bench", summary="Import ALE-Bench problem packages (import ale-bench PATH...: "
                     "zip or directory; the Rust tools/ crate built offline into the cmx cache)",
                     configure=_configure_import, run=_run_command))


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
