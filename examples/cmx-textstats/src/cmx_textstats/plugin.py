"""Hook implementations of cmx-textstats.

This module is imported on every ``cmx`` command, so it imports only ``cmx_core.api`` and
the standard library; the counting code lives in :mod:`cmx_textstats.count`, imported when
the step runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cmx_core.api import StepContext, StepOutput, StepType, hookimpl

PARAMS = {
    "path": "the text file to count (required)",
    "encoding": "text encoding used to split words (default utf-8)",
}


def _count(ctx: StepContext) -> StepOutput:
    from cmx_textstats.count import run

    return run(ctx)


@hookimpl
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    register(
        StepType(
            name="textstats.count",
            summary="Count the lines, words and bytes of a text file",
            run=_count,
            params=PARAMS,
            # a count is a measurement: cmx measures it again on every run unless the recipe
            # says `cache: {measurements: true}` (then a hit is labelled as cached)
            measures=True,
        )
    )


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
