"""Keep a plugin's README from going stale: its provides block is checked against the plugin.

A README made by ``cmx plugins new --suite`` holds a block between ``<!-- cmx:provides -->``
and ``<!-- /cmx:provides -->`` listing what the plugin registers (one line per kind: recipes,
steps, suites...). :func:`readme_problems` builds the same lines from the installed plugin's
own metadata (its registered providers and the names of the recipes in its recipe paths), so
a renamed step or a new recipe fails the plugin's tests with the lines to paste.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from cmx_core.plugins.loader import load_registry
from cmx_core.plugins.registry import Registry

BEGIN = "<!-- cmx:provides -->"
END = "<!-- /cmx:provides -->"


def provides_lines(plugin: str, registry: Registry | None = None) -> list[str]:
    """``- KIND: name, name`` for each kind of provider ``plugin`` registers, sorted; from a
    fresh load of the installed plugins unless ``registry`` is given."""
    registry = registry or load_registry()
    registry.collect_all()  # providers are registered lazily, on first use
    info = registry.plugins.get(plugin)
    if info is None:
        raise LookupError(f"no installed plugin has the entry-point name '{plugin}'")
    kinds = {kind: sorted(names) for kind, names in info.provides.items() if names}
    recipes = sorted(_recipe_names(path) for owner, path in registry.recipe_paths if owner == plugin)
    found = sorted(name for names in recipes for name in names)
    if found:
        kinds["recipes"] = found
    return [f"- {kind}: {', '.join(names)}" for kind, names in sorted(kinds.items())]


def _recipe_names(folder: Path) -> list[str]:
    names = []
    for path in sorted(folder.rglob("*.yaml")):
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict) and isinstance(loaded.get("name"), str):
            names.append(loaded["name"])
    return names


def readme_block(text: str) -> list[str] | None:
    """The lines between the markers of ``text``, or None without a block."""
    if BEGIN not in text or END not in text:
        return None
    inside = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [line for line in inside.strip().splitlines() if line.strip()]


def readme_problems(plugin: str, readme: Path, registry: Registry | None = None) -> list[str]:
    """Empty when ``readme``'s provides block lists exactly what ``plugin`` provides."""
    want = provides_lines(plugin, registry)
    have = readme_block(readme.read_text(encoding="utf-8"))
    paste = "\n".join([BEGIN, *want, END])
    if have is None:
        return [f"{readme} has no provides block; add:\n{paste}"]
    if have != want:
        return [f"{readme}: the provides block is stale; replace it with:\n{paste}"]
    return []
