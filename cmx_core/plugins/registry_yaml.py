"""The plugin registry: ``registry.yaml``, what every known plugin provides and where to get it.

Where the file is found (first hit wins):

1. ``CMX_REGISTRY`` — an explicit path (tests, a private registry);
2. ``registry.yaml`` next to the ``cmx_core`` package — a checkout of the cmx repository
   (editable install), where in-tree ``source: {path: ...}`` entries can be installed;
3. ``cmx_core/registry.yaml`` inside the installed package, when the wheel ships a copy.

``install_hint`` runs only on errors ("no loaded plugin provides step type X"), so it reads
the YAML without schema validation and never raises. ``read_registry`` validates against
``cmx_core/schemas/registry.schema.json``; ``check_installed`` compares what the entries of
installed plugins claim with what those plugins really register.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cmx_core import __version__
from cmx_core.errors import PluginError, UsageError

ENV_REGISTRY = "CMX_REGISTRY"
CORE_PLUGIN = "cmx-core"
"""The name cmx-core's own plugin is loaded under (cmx_core.plugins.loader.CORE)."""
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "registry.schema.json"
KINDS = ("steps", "detectors", "executors", "commands", "exporters", "suites")
_KIND_ALIASES = {
    "step": "steps", "step type": "steps", "steps": "steps",
    "detector": "detectors", "detectors": "detectors", "fact": "detectors",
    "executor": "executors", "executors": "executors",
    "command": "commands", "commands": "commands",
    "exporter": "exporters", "exporters": "exporters", "export format": "exporters",
    "suite": "suites", "suites": "suites",
    "recipe": "recipes", "recipes": "recipes", "tags": "recipes",
}


class RegistryError(PluginError):
    """``registry.yaml`` cannot be found, parsed or validated."""


@dataclass(frozen=True)
class Source:
    """Where ``cmx plugins install`` gets a plugin: an in-tree path or a package index name."""

    path: str | None = None
    index: str | None = None
    version: str | None = None

    def describe(self) -> str:
        if self.path:
            return f"path {self.path}"
        return f"index {self.index}{self.version or ''}"


@dataclass(frozen=True)
class Provides:
    """What an entry claims its plugin registers."""

    steps: tuple[str, ...] = ()
    detectors: tuple[str, ...] = ()
    executors: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    exporters: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    recipes: tuple[str, ...] = ()

    def of(self, kind: str) -> tuple[str, ...]:
        value: tuple[str, ...] = getattr(self, kind)
        return value

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(self.of(k)) for k in (*KINDS, "recipes") if self.of(k)}


@dataclass(frozen=True)
class Maintainer:
    name: str
    email: str | None = None
    github: str | None = None


@dataclass(frozen=True)
class Entry:
    """One plugin of ``registry.yaml``."""

    name: str
    distribution: str
    summary: str
    source: Source
    provides: Provides
    cmx_core: str
    state: str
    license: str
    maintainers: tuple[Maintainer, ...]
    homepage: str | None = None
    description: str = ""
    requires_plugins: tuple[str, ...] = ()
    deprecated_by: str | None = None
    keywords: tuple[str, ...] = ()

    def matches(self, text: str) -> bool:
        """Whether a ``cmx plugins search`` text occurs in the name, summary or claims."""
        needle = text.lower()
        hay = [self.name, self.distribution, self.summary, self.description, *self.keywords]
        for kind in (*KINDS, "recipes"):
            hay.extend(self.provides.of(kind))
        return any(needle in h.lower() for h in hay)

    def provides_item(self, kind: str, name: str) -> bool:
        if kind == "recipes":
            tags = {t for t in re.split(r"[,\s]+", name) if t}
            return any(pattern_matches(p, tags) for p in self.provides.recipes)
        return name in self.provides.of(kind)


@dataclass(frozen=True)
class RegistryFile:
    """The parsed, validated ``registry.yaml``."""

    path: Path
    entries: tuple[Entry, ...]

    @property
    def root(self) -> Path:
        """The directory in-tree ``source.path`` values are relative to."""
        return self.path.parent

    def get(self, name: str) -> Entry | None:
        wanted = normalize(name)
        for entry in self.entries:
            if wanted in (entry.name, normalize(entry.distribution)):
                return entry
        return None

    def require(self, name: str) -> Entry:
        entry = self.get(name)
        if entry is None:
            raise UsageError(
                f"no plugin named '{name}' in {self.path}; see `cmx plugins search TEXT`"
            )
        return entry

    def providers_of(self, kind: str, name: str) -> list[Entry]:
        return [e for e in self.entries if e.provides_item(kind, name)]

    def search(self, text: str) -> list[Entry]:
        return [e for e in self.entries if e.matches(text)]


@dataclass(frozen=True)
class Problem:
    """One finding of ``cmx registry check``: the entry and key at fault, and what is wrong."""

    message: str
    entry: str = ""
    key: str = ""
    path: str = ""
    line: int = 0

    def __str__(self) -> str:
        where = self.path + (f":{self.line}" if self.line else "")
        what = []
        if self.entry:
            what.append(f"entry '{self.entry}'")
        if self.key:
            what.append(f"key '{self.key}'")
        prefix = f"{where}: " if where else ""
        return prefix + (" ".join(what) + ": " if what else "") + self.message

    def as_dict(self) -> dict[str, Any]:
        return {"entry": self.entry, "key": self.key, "path": self.path, "line": self.line,
                "message": self.message}


def normalize(name: str) -> str:
    """PEP 503 normalisation: ``CMX_Foo.bar`` -> ``cmx-foo-bar``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pattern_matches(pattern: str, tags: Iterable[str]) -> bool:
    """``'mlperf,inference,*'`` matches any tag set holding ``mlperf`` and ``inference``."""
    have = set(tags)
    return all(t in have for t in pattern.split(",") if t != "*")


# --------------------------------------------------------------------------- locating


def registry_path() -> Path:
    """The registry file this cmx uses (see the module docstring for the search order)."""
    explicit = os.environ.get(ENV_REGISTRY)
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise RegistryError(f"{ENV_REGISTRY}={explicit}: no such file")
        return path
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "registry.yaml", package / "registry.yaml"):
        if candidate.is_file():
            return candidate
    raise RegistryError(
        "no registry.yaml found (neither in the cmx checkout nor in the cmx_core package); "
        f"set {ENV_REGISTRY}=PATH"
    )


# --------------------------------------------------------------------------- reading


def install_hint(kind: str, name: str) -> str:
    """Which registry plugin provides ``name`` of ``kind``, and the command that installs it.

    Returns e.g. ``"plugin cmx-mlperf provides it: cmx plugins install cmx-mlperf"``, or ""
    when no entry claims it or the registry cannot be read (this runs on an error path and
    must never raise). Not validated against the schema, to stay fast.
    """
    key = _KIND_ALIASES.get(kind.lower(), kind.lower())
    try:
        entries = _entries_from(_load_yaml(registry_path()), Path("registry.yaml"))
    except Exception:  # noqa: BLE001 - a broken registry must not hide the original error
        return ""
    found = [e for e in entries if e.provides_item(key, name) and e.state != "deprecated"]
    found = found or [e for e in entries if e.provides_item(key, name)]
    if not found:
        return ""
    names = " or ".join(e.name for e in found)
    verb = "provides" if len(found) == 1 else "provide"
    return f"plugin {names} {verb} it: cmx plugins install {found[0].name}"


def read_registry(path: Path | None = None) -> RegistryFile:
    """Parse and validate a registry file; the first problem is raised as RegistryError."""
    path = path or registry_path()
    problems, entries = validate_file(path, check_sources=False)
    if problems:
        raise RegistryError(str(problems[0]) + (
            f" (and {len(problems) - 1} more; run `cmx registry check`)"
            if len(problems) > 1 else ""))
    return RegistryFile(path, tuple(entries))


def validate_file(path: Path, *, check_sources: bool = True) -> tuple[list[Problem], list[Entry]]:
    """Schema and consistency problems of a registry file, and its entries when it parses.

    Unparseable YAML raises RegistryError; schema problems come back with no entries.
    ``check_sources`` also compares in-tree entries with their ``pyproject.toml`` (``cmx
    registry check``); reading the registry for search/info/install skips that, so a copy
    of the file without a checkout still works.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        import yaml  # deferred: optional yaml, only when this runs

        node = yaml.compose(text, Loader=_loader())
        data = yaml.load(text, Loader=_loader())
    except Exception as exc:  # noqa: BLE001 - yaml errors carry their own position
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RegistryError(f"{path}{line}: invalid YAML: {reason}") from None
    lines = _LineFinder(node)
    problems = list(duplicate_key_problems(path, node))
    problems += [_schema_problem(path, data, err, lines) for err in _schema_errors(data)]
    if problems:
        return problems, []
    entries = _entries_from(data, path)
    problems = list(_consistency_problems(path, entries, lines, check_sources and not is_packaged(path)))
    return problems, entries


def is_packaged(path: Path) -> bool:
    """Whether ``path`` is the copy shipped inside the cmx_core package (a wheel install):
    its in-tree ``source.path`` entries name a checkout's folders, which a wheel lacks, so
    they are not compared with their pyproject.toml."""
    try:
        return path.resolve() == (Path(__file__).resolve().parents[1] / "registry.yaml")
    except OSError:
        return False


def duplicate_key_problems(path: Path, node: Any) -> Iterator[Problem]:
    """A key written twice in one mapping (YAML keeps the last silently): one problem each."""
    import yaml  # deferred: yaml only when this runs (24 modules)

    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in current.value:
                name = getattr(key, "value", None)
                line = key.start_mark.line + 1
                if isinstance(name, str) and name in seen:
                    yield Problem(f"'{name}' is written twice (lines {seen[name]} and {line}); keep one",
                                  "", name, str(path), line)
                elif isinstance(name, str):
                    seen[name] = line
                stack.append(value)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _loader() -> Any:
    import yaml  # deferred: yaml only when this runs (24 modules)

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path: Path) -> Any:
    import yaml  # deferred: yaml only when this runs (24 modules)

    return yaml.load(path.read_text(encoding="utf-8"), Loader=_loader())


def _schema_errors(data: Any) -> list[Any]:
    import jsonschema  # deferred: jsonschema only when this runs (81 modules)

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))


def _schema_problem(path: Path, data: Any, err: Any, lines: _LineFinder) -> Problem:
    where = list(err.absolute_path)
    entry = ""
    if len(where) >= 2 and where[0] == "plugins" and isinstance(where[1], int):
        item = data["plugins"][where[1]]
        name = item.get("name") if isinstance(item, dict) else None
        entry = name if isinstance(name, str) else f"#{where[1] + 1}"
        where = where[2:]
    message = err.message
    full = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
        unknown = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        allowed = ", ".join(sorted(err.schema.get("properties", {})))
        message = f"unknown key '{unknown[0]}' (allowed: {allowed})"
        where, full = [*where, unknown[0]], [*full, unknown[0]]
    elif err.validator == "oneOf" and where[-1:] == ["source"]:
        message = "needs exactly one of 'path' or 'index'"
    return Problem(message, entry, ".".join(map(str, where)), str(path), lines.line(full))


class _LineFinder:
    """Maps a path of keys/indexes in the YAML document to its 1-based line."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def line(self, where: list[Any]) -> int:
        node = self.root
        best = node.start_mark.line + 1 if node is not None else 0
        for step in where:
            node = self._child(node, step)
            if node is None:
                break
            best = node.start_mark.line + 1
        return best

    @staticmethod
    def _child(node: Any, step: Any) -> Any:
        value = getattr(node, "value", None)
        if not isinstance(value, list):
            return None
        if isinstance(step, int):
            return value[step] if 0 <= step < len(value) else None
        for key, child in value:
            if getattr(key, "value", None) == step:
                return child
        return None


def _entries_from(data: Any, path: Path) -> list[Entry]:
    if not isinstance(data, Mapping) or not isinstance(data.get("plugins"), list):
        raise RegistryError(f"{path}: expected a mapping with a 'plugins' list")
    return [_entry(item) for item in data["plugins"]]


def _entry(item: Mapping[str, Any]) -> Entry:
    provides = item.get("provides") or {}
    source = item.get("source") or {}
    return Entry(
        name=item["name"],
        distribution=item["distribution"],
        summary=item.get("summary", ""),
        source=Source(source.get("path"), source.get("index"), source.get("version")),
        provides=Provides(**{k: tuple(provides.get(k) or ()) for k in (*KINDS, "recipes")}),
        cmx_core=item.get("cmx_core", ""),
        state=item.get("state", "incubating"),
        license=item.get("license", ""),
        maintainers=tuple(Maintainer(**m) for m in item.get("maintainers") or ()),
        homepage=item.get("homepage"),
        description=item.get("description", ""),
        requires_plugins=tuple(item.get("requires_plugins") or ()),
        deprecated_by=item.get("deprecated_by"),
        keywords=tuple(item.get("keywords") or ()),
    )


# --------------------------------------------------------------------------- consistency


def _consistency_problems(
    path: Path, entries: list[Entry], lines: _LineFinder, check_sources: bool
) -> Iterator[Problem]:
    names = {e.name for e in entries}
    seen: dict[str, str] = {}
    for index, entry in enumerate(entries):
        def problem(key: str, message: str, _i: int = index, _e: Entry = entry) -> Problem:
            where: list[Any] = ["plugins", _i, *key.split(".")] if key else ["plugins", _i]
            return Problem(message, _e.name, key, str(path), lines.line(where))

        dist = normalize(entry.distribution)
        for label in {entry.name, dist}:
            if label in seen and seen[label] != entry.name:
                yield problem("name", f"'{label}' is already used by entry '{seen[label]}'")
            elif label in seen:
                yield problem("name", f"'{label}' is listed twice")
            seen[label] = entry.name
        yield from (problem(k, m) for k, m in _specifier_problems(entry))
        for needed in entry.requires_plugins:
            if needed not in names:
                yield problem("requires_plugins", f"'{needed}' is not an entry of this registry")
        if entry.deprecated_by and entry.deprecated_by not in names:
            yield problem("deprecated_by", f"'{entry.deprecated_by}' is not an entry")
        if entry.state == "deprecated" and not entry.deprecated_by:
            yield problem("deprecated_by", "a deprecated entry names its replacement")
        if entry.source.path and check_sources:
            yield from (problem(k, m) for k, m in _in_tree_problems(path.parent, entry, names))


def _specifier_problems(entry: Entry) -> Iterator[tuple[str, str]]:
    for key, text in (("cmx_core", entry.cmx_core), ("source.version", entry.source.version)):
        if not text:
            continue
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            yield key, f"'{text}' is not a PEP 440 specifier set (e.g. '>=0.1,<0.2')"
            continue
        if key == "cmx_core" and entry.state != "deprecated" and __version__ not in spec:
            yield key, f"'{text}' excludes this cmx-core {__version__}; update the entry"


def _in_tree_problems(
    root: Path, entry: Entry, names: set[str]
) -> Iterator[tuple[str, str]]:
    """Static checks of an in-tree plugin's pyproject.toml against its entry."""
    project_dir = root / str(entry.source.path)
    pyproject = project_dir / "pyproject.toml"
    if not pyproject.is_file():
        yield "source.path", f"{pyproject} does not exist"
        return
    parsed = _toml(pyproject.read_text(encoding="utf-8"))
    if parsed is None:  # Python 3.10: the static check needs tomllib
        return
    project = parsed.get("project", {})
    if normalize(project.get("name", "")) != normalize(entry.distribution):
        yield "distribution", (f"{pyproject} builds '{project.get('name')}', "
                               f"not '{entry.distribution}'")
    if not (project.get("entry-points") or {}).get("cmx"):
        yield "source.path", f"{pyproject} declares no [project.entry-points.cmx]"
    yield from _dependency_problems(entry, project.get("dependencies") or [], names)


def _dependency_problems(
    entry: Entry, dependencies: list[str], names: set[str]
) -> Iterator[tuple[str, str]]:
    core_spec = None
    for text in dependencies:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        dep = normalize(req.name)
        if dep == "cmx-core":
            core_spec = req.specifier
        elif dep in names and dep not in entry.requires_plugins:
            yield "requires_plugins", f"the plugin depends on plugin '{dep}'; list it here"
    if core_spec is None:
        yield "cmx_core", "the plugin's pyproject does not depend on cmx-core"
    elif entry.cmx_core and core_spec != SpecifierSet(entry.cmx_core):
        yield "cmx_core", (f"'{entry.cmx_core}' differs from the plugin's requirement "
                           f"cmx-core{core_spec}")


def pip_requirement(registry_file: RegistryFile, entry: Entry) -> str:
    """What ``pip install`` gets for an entry: a checkout directory or ``dist<spec>``."""
    if entry.source.path:
        directory = (registry_file.root / entry.source.path).resolve()
        if not (directory / "pyproject.toml").is_file():
            raise UsageError(
                f"{entry.name} is an in-tree plugin ({entry.source.path}) but {directory} "
                "holds no pyproject.toml; install from a cmx checkout: "
                f"CMX_REGISTRY=CHECKOUT/registry.yaml cmx plugins install {entry.name}"
            )
        return str(directory)
    return f"{entry.source.index}{entry.source.version or ''}"


def _toml(text: str) -> dict[str, Any] | None:
    """``text`` parsed as TOML, or None where the standard library has no tomllib (3.10)."""
    try:
        # deferred: start-up: 6 modules not needed to start cmx
        import tomllib  # type: ignore[import-not-found, unused-ignore]  # 3.11+
    except ModuleNotFoundError:
        return None
    parsed: dict[str, Any] = tomllib.loads(text)
    return parsed
