"""Loading one recipe file: read it, parse the YAML (:mod:`cmx_core.recipes.yaml_lines`), check it
against the format (:mod:`cmx_core.recipes.check`) and build the model
(:mod:`cmx_core.recipes.model`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cmx_core.datautil import read_capped
from cmx_core.recipes.check import validate_recipe_data
from cmx_core.recipes.model import Recipe, recipe_from_data
from cmx_core.recipes.yaml_lines import MAX_FILE_BYTES, parse_yaml

__all__ = ["digest_of", "load_recipe_file", "validate_recipe_data"]


def load_recipe_file(path: Path, source: str = "core") -> Recipe:
    """Read, validate and build one recipe file; errors name file, line and key."""
    raw = read_capped(path, MAX_FILE_BYTES)  # parse_yaml refuses a longer one
    data = parse_yaml(raw, path)
    validate_recipe_data(data, path)
    return recipe_from_data(data, path, digest_of(raw), source)


def digest_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
