"""``cmx registry check``: what the installed distributions really register, held against
what ``registry.yaml`` claims for them (:mod:`cmx_core.plugins.registry_yaml`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cmx_core.plugins.registry_yaml import (
    CORE_PLUGIN,
    KINDS,
    Entry,
    Problem,
    RegistryFile,
    _load_yaml,
    normalize,
    pattern_matches,
)

if TYPE_CHECKING:
    from cmx_core.plugins.registry import Registry

# --------------------------------------------------------------------------- installed


@dataclass
class Installed:
    """What one installed distribution really registers (all its entry points together)."""

    distribution: str
    version: str
    plugin_names: list[str] = field(default_factory=list)
    provides: dict[str, set[str]] = field(default_factory=dict)
    recipe_tags: list[tuple[Path, tuple[str, ...]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def installed_plugins(loaded: Registry) -> dict[str, Installed]:
    """Group the loaded plugins by normalised distribution name (cmx-core excluded)."""
    result: dict[str, Installed] = {}
    loaded.collect_all()
    for name, info in loaded.plugins.items():
        if name == CORE_PLUGIN:
            continue
        dist = normalize(info.distribution)
        item = result.setdefault(dist, Installed(dist, info.version))
        item.plugin_names.append(name)
        if info.error:
            item.errors.append(f"{name}: {info.error}")
        for kind, provided in info.provides.items():
            item.provides.setdefault(kind, set()).update(provided)
    for plugin_name, directory in loaded.recipe_paths:
        owner = loaded.plugins.get(plugin_name)
        if owner is not None and plugin_name != CORE_PLUGIN:
            item = result[normalize(owner.distribution)]
            item.recipe_tags.extend(_recipe_tags(directory, item.errors))
    return result


def _recipe_tags(directory: Path, errors: list[str]) -> list[tuple[Path, tuple[str, ...]]]:
    found = []
    for path in sorted(Path(directory).rglob("*.yaml")):
        try:
            found.append((path, recipe_tags(path)))
        except Exception as exc:  # noqa: BLE001 - reported as a problem of the entry
            errors.append(f"recipe {path.name}: {str(exc).splitlines()[0]}")
    return found


def recipe_tags(path: Path) -> tuple[str, ...]:
    """A recipe file's tags, through cmx-core's recipe loader when it is available."""
    try:
        from cmx_core.recipes.load import load_recipe_file  # deferred: start-up: 14 modules not needed to start cmx
    except ImportError:
        data = _load_yaml(path)
        tags = data.get("tags", []) if isinstance(data, Mapping) else []
        return tuple(tags.split(",") if isinstance(tags, str) else tags)
    return tuple(load_recipe_file(path).tags)


def check_installed(registry_file: RegistryFile, loaded: Registry) -> tuple[list[Problem], int]:
    """Claims of the installed entries vs what those plugins register; (problems, checked)."""
    installed = installed_plugins(loaded)
    problems: list[Problem] = []
    checked = 0
    listed = {normalize(e.distribution) for e in registry_file.entries}
    unlisted = {dist: item for dist, item in installed.items() if dist not in listed}
    for entry in registry_file.entries:
        item = installed.get(normalize(entry.distribution))
        if item is None:
            problems.extend(Problem(msg, entry.name, "distribution", str(registry_file.path))
                            for msg in misspelt_distribution(entry, unlisted))
            continue
        checked += 1
        problems.extend(
            Problem(msg, entry.name, key, str(registry_file.path))
            for key, msg in compare_claims(entry, item)
        )
    return problems, checked


def misspelt_distribution(entry: Entry, unlisted: Mapping[str, Installed]) -> Iterator[str]:
    """An entry whose distribution is not installed while an installed plugin no entry lists
    registers what it claims, or has a name one typo away: its ``distribution`` is wrong."""
    wanted = normalize(entry.distribution)
    close = set(difflib.get_close_matches(wanted, list(unlisted), n=3, cutoff=0.85))
    for dist, item in sorted(unlisted.items()):
        shared = sorted(n for kind in KINDS for n in set(entry.provides.of(kind)) & item.provides.get(kind, set()))
        if shared or dist in close:
            why = f"registers {', '.join(shared)}, which this entry claims" if shared else "has a similar name"
            yield (f"'{entry.distribution}' is not installed, but {dist} {item.version} (installed, in no entry) "
                   f"{why}; is 'distribution' misspelt? (it must be the installed distribution's name, {dist})")


def compare_claims(entry: Entry, item: Installed) -> Iterator[tuple[str, str]]:
    """(key, message) for every difference between an entry and its installed plugin."""
    for error in item.errors:
        yield "", f"installed plugin fails to load: {error}"
    for kind in KINDS:
        claimed, real = set(entry.provides.of(kind)), item.provides.get(kind, set())
        for name in sorted(claimed - real):
            yield f"provides.{kind}", (f"claims '{name}' but {item.distribution} "
                                       f"{item.version} does not register it")
        for name in sorted(real - claimed):
            yield f"provides.{kind}", (f"{item.distribution} {item.version} registers "
                                       f"'{name}', which the entry does not list")
    tag_sets = [tags for _, tags in item.recipe_tags]
    for pattern in entry.provides.recipes:
        if not any(pattern_matches(pattern, tags) for tags in tag_sets):
            yield "provides.recipes", f"no recipe of {item.distribution} matches '{pattern}'"
    for path, tags in item.recipe_tags:
        if not any(pattern_matches(p, tags) for p in entry.provides.recipes):
            yield "provides.recipes", (f"recipe {path.name} (tags {','.join(tags)}) "
                                       "matches none of the entry's patterns")
    yield from published_range_problems(entry, item)
    if entry.source.index and entry.source.version and item.version not in SpecifierSet(entry.source.version):
        yield "source.version", (f"installed {item.distribution} {item.version} is "
                                 f"outside '{entry.source.version}'")


def published_range_problems(entry: Entry, item: Installed) -> Iterator[tuple[str, str]]:
    """A community (index) entry's ``cmx_core`` must equal the cmx-core requirement in the
    installed distribution's published metadata (in-tree entries are compared with their
    pyproject.toml instead)."""
    if not entry.source.index or not entry.cmx_core:
        return
    try:
        published = installed_core_requirement(metadata.distribution(item.distribution))
        claimed = SpecifierSet(entry.cmx_core)
    except (metadata.PackageNotFoundError, InvalidSpecifier):
        return  # loaded in-process without metadata; a bad specifier is reported on its own
    if published is None:
        yield "cmx_core", f"{item.distribution} {item.version} does not declare a cmx-core requirement"
    elif published != claimed:
        yield "cmx_core", (f"'{entry.cmx_core}' differs from the requirement cmx-core{published} that "
                           f"{item.distribution} {item.version} publishes; make them equal")


def installed_core_requirement(dist: Any) -> Any:
    """The SpecifierSet of an installed distribution's unconditional cmx-core requirement."""
    for text in dist.requires or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if normalize(req.name) == CORE_PLUGIN and req.marker is None:
            return req.specifier
    return None


# --------------------------------------------------------------------------- install


