"""Plugin loading: entry points of group ``cmx``, each loaded on its own.

A plugin that fails to import, declares hooks that do not match the hookspecs, needs
another cmx-core version or raises while registering is recorded with its error and
skipped; the rest keep working. ``strict`` (``--strict-plugins`` or
``CMX_STRICT_PLUGINS=1``) turns any such error into a :class:`PluginError`.
``CMX_LOAD_PLUGINS`` (comma list of entry-point names; empty means none) limits loading;
``CMX_DISABLE_PLUGINS`` (comma list) turns single plugins off (``--disable-plugin NAME``).
Every load problem is one warning line on the first use of the registry in a process
(:func:`load_warnings`); strict mode lists them all in one error.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import pluggy

from cmx_core import __version__, paths
from cmx_core.datautil import atomic_write, loads_bounded, read_bounded
from cmx_core.errors import PluginError
from cmx_core.plugins import hookspecs
from cmx_core.plugins.command_index import DISCOVERY_FILE, discovery_fingerprint, write_summaries
from cmx_core.plugins.hook_calls import fire
from cmx_core.plugins.hook_calls import one_line as _one_line
from cmx_core.plugins.registry import CORE, PluginInfo, Registry, failure_line

if TYPE_CHECKING:
    from cmx_core.sandbox.backend import Sandbox

GROUP = "cmx"
CORE_PLUGIN = "cmx_core.builtin.plugin"
"""cmx-core's own plugin (shell, python and cmx.facts steps, the minimal detectors, the local
executor), loaded by module name as an entry point is: its local executor belongs to the run
layer above this one, so the loader never imports it (docs/architecture.md)."""


_REGISTRY: Registry | None = None


def get_registry(*, strict: bool | None = None, reload: bool = False) -> Registry:
    """The process-wide registry, loaded on first use."""
    global _REGISTRY
    if _REGISTRY is None or reload:
        if strict is None:
            strict = os.environ.get("CMX_STRICT_PLUGINS", "") not in ("", "0")
        _REGISTRY = load_registry(strict=strict)
        for line in load_warnings(_REGISTRY):
            _print_warning(line)
        _REGISTRY.on_failure = _print_warning
    return _REGISTRY


def _print_warning(line: str) -> None:
    print(line, file=sys.stderr)


SLOW_IMPORT_S = 0.1
"""A plugin whose entry-point module takes longer to import is named by ``cmx plugins list``."""


def load_warnings(registry: Registry) -> list[str]:
    """One line per plugin that failed to import or register, naming it and where its
    traceback is, and per unknown ``CMX_LOAD_PLUGINS``/``CMX_DISABLE_PLUGINS`` name.
    Conflicts are reported where the provider is used (they need every kind collected)."""
    lines = [f"cmx: warning: {text}" for text in registry.selection_warnings]
    for name, info in registry.plugins.items():
        if info.error and info.traceback is not None:
            lines.append(failure_line(name, info))
    return lines


def slow_plugins(registry: Registry, limit_s: float = SLOW_IMPORT_S) -> list[tuple[str, float]]:
    """(name, seconds) of each plugin whose import took longer than ``limit_s``."""
    return [(n, i.import_s) for n, i in registry.plugins.items() if i.import_s is not None and i.import_s > limit_s]


def disable_plugins(names: Iterable[str]) -> None:
    """Turn plugins off for this process and its children (``--disable-plugin NAME``): adds
    them to ``CMX_DISABLE_PLUGINS`` and forgets the loaded registry."""
    current = [n for n in os.environ.get("CMX_DISABLE_PLUGINS", "").split(",") if n.strip()]
    os.environ["CMX_DISABLE_PLUGINS"] = ",".join(dict.fromkeys([*current, *(n.strip() for n in names)]))
    reset_registry()


def get_sandbox(name: str | None = None) -> Sandbox:
    """The sandbox backend ``name`` (default ``bubblewrap``) of the process-wide registry."""
    return get_registry().sandbox(name)


def reset_registry() -> None:
    """Forget the loaded registry (tests; after installing a plugin)."""
    global _REGISTRY
    _REGISTRY = None


def load_registry(*, strict: bool = False, extra: Iterable[tuple[str, object]] = ()) -> Registry:
    """Load cmx-core's built-ins, the entry-point plugins and ``extra`` (name, module)."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager=manager)
    _add(registry, CORE, CORE, __version__, importlib.import_module(CORE_PLUGIN))
    entries, registry.selection_warnings = _selected_entry_points(strict)
    for entry in entries:
        _load_entry_point(registry, entry)
    for name, module in extra:
        _add(registry, name, name, "0", module)
    registry.from_entry_points = not extra
    if strict and registry.errors():
        failures = registry.errors()
        listed = "; ".join(f"'{name}': {error}" for name, error in failures.items())
        count = f"{len(failures)} plugins" if len(failures) > 1 else "plugin"
        raise PluginError(f"{count} failed to load (strict plugin mode): {listed}")
    return registry


class EntrySpec(NamedTuple):
    """An entry point of group ``cmx`` as recorded in the discovery cache."""

    name: str
    value: str
    distribution: str
    version: str
    refusal: str | None = None  # why this cmx-core cannot load it (version range)

    def load(self) -> object:
        module_name, _, attr = self.value.partition(":")
        module = importlib.import_module(module_name.strip())
        return getattr(module, attr.strip()) if attr else module


def _names(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    return None if value is None else {n.strip() for n in value.split(",") if n.strip()}


def _selected_entry_points(strict: bool = False) -> tuple[list[EntrySpec], list[str]]:
    """The entry points ``CMX_LOAD_PLUGINS`` and ``CMX_DISABLE_PLUGINS`` leave, and a warning
    per name they give that is not installed (an error in strict mode)."""
    entries = _discover()
    known = {e.name for e in entries}
    warnings = []
    for variable in ("CMX_LOAD_PLUGINS", "CMX_DISABLE_PLUGINS"):
        for name in sorted((_names(variable) or set()) - known):
            text = (f"{variable} names '{name}', which is not installed "
                    f"(installed: {', '.join(sorted(known)) or 'none'})")
            if strict:
                raise PluginError(text)
            warnings.append(text)
    wanted, disabled = _names("CMX_LOAD_PLUGINS"), _names("CMX_DISABLE_PLUGINS") or set()
    chosen = [e for e in entries if (wanted is None or e.name in wanted) and e.name not in disabled]
    return chosen, warnings


def _discover() -> list[EntrySpec]:
    """Entry points of group ``cmx``, cached against the mtimes of ``sys.path`` directories.

    Scanning every installed distribution's metadata costs tens of milliseconds; installing
    or removing a distribution changes its site directory's mtime, which invalidates the
    cache.
    """
    fingerprint = discovery_fingerprint()
    cache_file = paths.cache_dir() / DISCOVERY_FILE
    try:
        record = loads_bounded(read_bounded(cache_file))
        if record.get("fingerprint") == fingerprint:
            return [EntrySpec(**e) for e in record["entries"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    entries = _scan_entry_points()

    try:
        atomic_write(cache_file, json.dumps({"fingerprint": fingerprint, "entries": [e._asdict() for e in entries]}))
    except OSError:
        pass
    return entries


def _scan_entry_points() -> list[EntrySpec]:
    from importlib import metadata  # deferred: start-up: the discovery cache answers a warm start (email, zipfile)

    found = []
    for entry in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
        dist = entry.dist
        refusal = None
        try:
            _check_core_requirement(dist)
        except PluginError as exc:
            refusal = str(exc)
        found.append(EntrySpec(entry.name, entry.value, dist.metadata["Name"] if dist else "?",
                               dist.version if dist else "0", refusal))
    return found


def remember_commands(registry: Registry) -> None:
    """Record plugin command names and summaries for ``cmx --help`` (see command_index)."""
    commands = [(c.name, c.summary) for c in registry.commands.values()]
    files = []
    for name in {c.plugin for c in registry.commands.values()}:
        module = registry.manager.get_plugin(name)
        path = getattr(module, "__file__", None)
        if path:
            files.append(path)
    write_summaries(commands, files)


def _load_entry_point(registry: Registry, entry: EntrySpec) -> None:
    start = time.perf_counter()
    try:
        if entry.refusal:
            raise PluginError(entry.refusal)
        module = entry.load()
    except Exception as exc:  # noqa: BLE001 - any import failure must not stop the CLI

        registry.plugins[entry.name] = PluginInfo(
            entry.name, entry.distribution, entry.version, entry.value, error=_one_line(exc),
            import_s=time.perf_counter() - start, traceback="".join(traceback.format_exception(exc)),
        )
        return
    elapsed = time.perf_counter() - start
    _add(registry, entry.name, entry.distribution, entry.version, module)
    registry.plugins[entry.name] = dataclasses.replace(registry.plugins[entry.name], import_s=elapsed)


def _check_core_requirement(dist: Any) -> None:
    """Refuse a plugin whose ``cmx-core`` requirement excludes this cmx-core."""
    if dist is None:
        return
    from packaging.requirements import Requirement  # deferred: packaging only when this runs (14 modules)

    for text in dist.requires or []:
        req = Requirement(text)
        if req.name.replace("_", "-").lower() != CORE or req.marker is not None:
            continue
        if req.specifier and not req.specifier.contains(__version__, prereleases=True):
            raise PluginError(
                f"needs cmx-core{req.specifier}, but cmx-core {__version__} is installed"
            )


def _add(registry: Registry, name: str, dist: str, version: str, module: object) -> None:
    try:
        registry.manager.register(module, name=name)
        registry.manager.check_pending()
    except Exception as exc:  # noqa: BLE001 - pluggy validation errors name the hook

        if registry.manager.is_registered(module):
            registry.manager.unregister(module)
        registry.plugins[name] = PluginInfo(
            name, dist, version, getattr(module, "__name__", str(module)), error=_one_line(exc),
            traceback="".join(traceback.format_exception(exc)),
        )
        return
    registry.plugins[name] = PluginInfo(name, dist, version, getattr(module, "__name__", "?"))


def prune_resources(referenced: frozenset[str], dry_run: bool = False) -> list[str]:
    """Every plugin's ``cmx_prune_resources``: one line per thing removed (or that would be)."""
    answers = get_registry().hook.cmx_prune_resources(referenced=referenced, dry_run=dry_run)
    return [str(line) for answer in answers for line in answer or ()]


def call_event(name: str, **kwargs: Any) -> None:
    """Fire an event hook of the process-wide registry, one implementation at a time: a
    failing observer is reported on stderr by plugin and hook, never fatal, and never stops
    the other plugins' implementations (:mod:`cmx_core.plugins.hook_calls`)."""
    fire(getattr(get_registry().hook, name), kwargs)
