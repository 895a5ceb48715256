"""The pip commands behind ``cmx plugins install|uninstall``.

* A name may carry extras (``cmx-mlperf[llm]``); they are passed on to pip.
* An in-tree entry (``source: {path: ...}``) installs from the checkout. When its build
  backend is importable here (hatchling, as for every in-tree plugin), pip builds it with
  ``--no-build-isolation``: nothing is fetched from an index, so ``PIP_NO_INDEX=1`` works.
  Without the backend and without an index, the error names the backend to install.
* Names are the registry name, the distribution or the entry-point name (``detect``).
* Commands are shown shell-quoted (:func:`shell_line`), so a printed command can be pasted.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from cmx_core.errors import UsageError, did_you_mean
from cmx_core.plugins.local_source import build_options, is_local_path, read_local_source
from cmx_core.plugins.registry_yaml import Entry, RegistryFile, _toml, normalize, pip_requirement

PIP = (sys.executable, "-m", "pip")


@dataclass(frozen=True)
class Wanted:
    """One ``NAME[extra,...]`` of the command line."""

    name: str
    extras: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Wanted:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            raise UsageError(f"plugin name '{text}': write NAME or NAME[extra,...], e.g. 'cmx-mlperf[llm]'") from None
        if req.specifier or req.url or req.marker:
            raise UsageError(f"plugin name '{text}': give the name only (and extras); the registry says the version")
        return cls(req.name, tuple(sorted(req.extras)))

    def suffix(self) -> str:
        return f"[{','.join(self.extras)}]" if self.extras else ""


def shell_line(command: list[str] | tuple[str, ...]) -> str:
    """``command`` as one line a POSIX shell reads back as the same arguments."""
    return shlex.join(command)


def entry_point_names() -> dict[str, str]:
    """Entry-point name -> normalised distribution of every installed cmx plugin."""
    return {e.name: normalize(e.dist.metadata["Name"]) for e in metadata.entry_points(group="cmx")
            if e.dist is not None}


def find_entry(registry: RegistryFile, name: str) -> Entry | None:
    """The entry named ``name``: its registry name, its distribution, ``cmx-NAME``, or the
    entry-point name of an installed plugin."""
    for candidate in (name, f"cmx-{name}", entry_point_names().get(name, "")):
        entry = registry.get(candidate) if candidate else None
        if entry is not None:
            return entry
    return None


def require_entry(registry: RegistryFile, name: str) -> Entry:
    """:func:`find_entry` or a UsageError with a "did you mean"."""
    entry = find_entry(registry, name)
    if entry is None:
        hint = did_you_mean(name, [e.name for e in registry.entries])
        raise UsageError(f"no plugin named '{name}' in {registry.path}{hint}; see `cmx plugins search TEXT`")
    return entry


def backend_available() -> bool:
    """Whether the in-tree plugins' build backend (hatchling) is importable here."""
    return importlib.util.find_spec("hatchling") is not None


def index_disabled() -> bool:
    return os.environ.get("PIP_NO_INDEX", "").lower() not in ("", "0", "false", "no", "off")


def install_command(registry: RegistryFile, names: list[str], *, editable: bool | None = False,
                    upgrade: bool = False) -> list[str]:
    """The pip command installing ``names`` (with extras) and the plugins they need. A name
    that is a path (``./cmx-acme``) is a plugin's source directory (:mod:`.local_source`).
    ``editable=None``: editable when a source directory named is installed editable now (a
    reinstall keeps the development install; ``--no-editable`` replaces it)."""
    wanted = [Wanted.parse(n) for n in names if not is_local_path(n)]
    local = [read_local_source(n) for n in names if is_local_path(n)]
    chosen: list[tuple[Entry, Wanted]] = []
    pending = list(wanted)
    while pending:
        item = pending.pop(0)
        entry = require_entry(registry, item.name)
        if all(entry != e for e, _ in chosen):
            _check_extras(registry, entry, item)
            chosen.append((entry, item))
            pending += [Wanted(n) for n in entry.requires_plugins]
    if editable is None:
        directories = [s.path for s in local] + [Path(pip_requirement(registry, e)) for e, _ in chosen if e.source.path]
        editable = keeps_editable(directories)
    command = [*PIP, "install", "--disable-pip-version-check"]
    if upgrade:
        command.append("--upgrade")
    if any(e.source.path for e, _ in chosen):
        command += _in_tree_build_options(registry, [e for e, _ in chosen if e.source.path], editable)
    for entry, item in chosen:
        if entry.state == "deprecated":
            print(f"cmx: warning: {entry.name} is deprecated; use {entry.deprecated_by}", file=sys.stderr)
        requirement = pip_requirement(registry, entry)
        if entry.source.path:
            command += ["--editable"] if editable else []
            command.append(requirement + item.suffix())
        else:
            command.append(f"{entry.source.index}{item.suffix()}{entry.source.version or ''}")
    for source in local:
        options = build_options(source, editable=editable, index_off=index_disabled())
        command[4:4] = [o for o in options if o not in command]
        command += source.requirement(editable)
    return command


def editable_installs() -> set[Path]:
    """The source directories installed editable in this environment (PEP 610's
    ``direct_url.json`` with ``dir_info.editable``)."""
    import json  # deferred: only an install asks
    from urllib.parse import unquote, urlparse  # deferred: only an install asks

    found: set[Path] = set()
    for dist in metadata.distributions():
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        url = urlparse(str(direct.get("url", "")))
        if (direct.get("dir_info") or {}).get("editable") and url.scheme == "file":
            found.add(Path(unquote(url.path)).resolve())
    return found


def keeps_editable(directories: list[Path]) -> bool:
    """Whether one of the source ``directories`` is installed editable now: then the install
    stays editable (said on stderr), as a development install should."""
    installed = editable_installs()
    kept = [d for d in directories if d.resolve() in installed]
    for directory in kept:
        print(f"cmx: {directory} is installed editable; keeping it editable (--no-editable replaces it)",
              file=sys.stderr)
    return bool(kept)


def _in_tree_build_options(registry: RegistryFile, entries: list[Entry], editable: bool) -> list[str]:
    if backend_available():
        return _editable_options(registry, entries) if editable else ["--no-build-isolation"]
    if index_disabled():
        raise UsageError("in-tree plugins build with hatchling, which is not installed here, and PIP_NO_INDEX "
                         "turns the index off: install it first (pip install hatchling) or unset PIP_NO_INDEX")
    return []


def _editable_options(registry: RegistryFile, entries: list[Entry]) -> list[str]:
    """``--no-build-isolation`` when every in-tree source builds editable with what is here;
    else, with an index, pip's isolated build (it fetches ``editables``); offline, the error
    :func:`~cmx_core.plugins.local_source.build_options` gives."""
    for entry in entries:
        folder = registry.root / (entry.source.path or ".")
        if not (folder / "pyproject.toml").is_file():
            continue  # no checkout beside the registry: pip_requirement says so
        try:
            build_options(read_local_source(str(folder)), editable=True, index_off=index_disabled())
        except UsageError:
            if index_disabled():
                raise
            return []
    return ["--no-build-isolation"]


def _check_extras(registry: RegistryFile, entry: Entry, item: Wanted) -> None:
    """Refuse an extra an in-tree plugin does not declare (an index one is pip's to check)."""
    if not item.extras or not entry.source.path:
        return
    declared = _declared_extras(registry.root / entry.source.path / "pyproject.toml")
    unknown = [x for x in item.extras if declared is not None and normalize(x) not in declared]
    if unknown:
        have = ", ".join(sorted(declared or ())) or "none"
        raise UsageError(f"{entry.name} has no extra '{unknown[0]}' (it has: {have})")


def _declared_extras(pyproject: Path) -> set[str] | None:
    try:
        parsed = _toml(pyproject.read_text(encoding="utf-8"))
    except OSError:
        return None
    if parsed is None:
        return None
    return {normalize(x) for x in (parsed.get("project", {}).get("optional-dependencies") or {})}


def installed_distributions() -> dict[str, str]:
    """Normalised distribution -> version of everything that declares a ``cmx`` entry point."""
    return {normalize(e.dist.metadata["Name"]): e.dist.version for e in metadata.entry_points(group="cmx")
            if e.dist is not None}


def uninstall_command(registry: RegistryFile, names: list[str]) -> list[str]:
    """The pip command removing installed plugins named by registry, distribution or entry-point
    name; a plugin that is not installed is a UsageError."""
    installed = installed_distributions()
    points = entry_point_names()
    dists: list[str] = []
    for name in names:
        entry = find_entry(registry, name)
        dist = normalize(entry.distribution) if entry else points.get(name, normalize(name))
        if dist not in installed:
            known = sorted({*installed, *points})
            hint = did_you_mean(name, known) if entry is None else ""
            raise UsageError(f"'{name}' is not installed, so there is nothing to uninstall{hint} "
                             f"(installed cmx plugins: {', '.join(sorted(installed)) or 'none'})")
        dists.append(dist)
    return [*PIP, "uninstall", "--disable-pip-version-check", "-y", *dists]


def wheel_install_hint(registry: RegistryFile, entry: Entry) -> str:
    """The command that installs ``entry``: plain, or for an in-tree plugin whose sources are
    not next to this registry (a wheel install of cmx-core), pointed at a checkout's registry."""
    name = shlex.quote(entry.name)
    if entry.source.path and not (registry.root / entry.source.path / "pyproject.toml").is_file():
        return f"CMX_REGISTRY=CHECKOUT/registry.yaml cmx plugins install {name}"
    return f"cmx plugins install {name}"
