"""Hook implementations of cmx-textstats.

This module is imported on every ``cmx`` command, so it imports only ``cmx_core.api`` and
the standard library; the counting code lives in :mod:`cmx_textstats.count`, imported when
a step runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmx_core.api import Detector, StepContext, StepOutput, StepType, hookimpl

PARAMS = {
    "path": "the text file to count (required)",
    "encoding": "text encoding used to split words (default utf-8)",
}
TOP_PARAMS = {
    "path": "the text file to read (required)",
    "n": "how many words to keep (default 5)",
    "encoding": "text encoding (default utf-8)",
}
TOP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "n": {"type": "integer", "minimum": 1},
        "encoding": {"type": "string", "minLength": 1},
    },
}


def _count(ctx: StepContext) -> StepOutput:
    from cmx_textstats.count import run

    return run(ctx)


def _top(ctx: StepContext) -> StepOutput:
    from cmx_textstats.count import top

    return top(ctx)


def _encoding() -> dict[str, str]:
    import locale
    import sys

    return {"preferred": locale.getpreferredencoding(False).lower(), "filesystem": sys.getfilesystemencoding()}


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
    register(
        StepType(
            name="textstats.top",
            summary="The most frequent words of a text file",
            run=_top,
            params=TOP_PARAMS,
            params_schema=TOP_SCHEMA,
            examples=({"path": "notes.txt", "n": 3}, {"path": "notes.txt", "encoding": "latin-1"}),
        )
    )


@hookimpl
def cmx_register_detectors(register: Callable[[Detector], None]) -> None:
    register(Detector(name="text_encoding", summary="The locale's preferred and the file system's text encodings",
                      detect=_encoding, returns=dict))


@hookimpl
def cmx_recipe_paths() -> list[Path]:
    return [Path(__file__).parent / "recipes"]
