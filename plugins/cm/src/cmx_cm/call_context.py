"""The context of one script runner's ``cmind.access`` calls, set before any script runs.

A module of its own, with nothing to import, so that the runner sets it without loading the
actions themselves: most scripts call none (print-hello-world runs no ``customize.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Context(NamedTuple):
    """What the calls of one script runner need: the recipe directory of its collection
    (``cmx import cm --out`` or the live translation), the env prefix, and the time limit."""

    recipe_dir: Path | None
    prefix: str = "CM"
    timeout_s: float | None = None


current = Context(recipe_dir=None)


def use(context: Context) -> None:
    """Set the context of this process's calls (the script runner does, before any script)."""
    global current
    current = context
