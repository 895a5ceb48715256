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
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import pluggy

from cmx_core import __version__, hookspecs
from cmx_core.errors import PluginError
from cmx_core.plugin_events import one_line as _one_line
from cmx_core.providers import Command, Detector, Executor, Exporter, StepType, Suite

if TYPE_CHECKING:
    from cmx_core.sandbox.backend import Sandbox, SandboxBackend

GROUP = "cmx"
CORE = "cmx-core"
P = TypeVar("P", StepType, Detector, Executor, Command, Exporter, Suite, "SandboxBackend")


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as ``cmx plugins list`` shows it."""

    name: str
    distribution: str
    version: str
    module: str
    error: str | None = None
    provides: dict[str, list[str]] = field(default_factory=dict)
    import_s: float | None = None
    """Seconds importing the entry-point module took (None: not imported by an entry point)."""
    traceback: str | None = None
    """The formatted traceback of the load error (``cmx plugins info NAME`` shows it)."""


KINDS = {
    "steps": "cmx_register_steps",
    "detectors": "cmx_register_detectors",
    "executors": "cmx_register_executors",
    "commands": "cmx_register_commands",
    "exporters": "cmx_register_exporters",
    "suites": "cmx_register_suites",
    "sandboxes": "cmx_register_sandboxes",
}
"""Provider kinds and their registration hooks."""


class Registry:
    """Everything the loaded plugins provide, by kind and name.

    Each kind's registration hooks are called the first time that kind is asked for, so a
    run never pays for building, say, every plugin's CLI commands.
    """

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.manager = manager
        self.plugins: dict[str, PluginInfo] = {}
        self._conflicts: dict[str, tuple[str, ...]] = {}
        self._providers: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        self._collected: set[str] = set()
        self._recipe_paths: list[tuple[str, Path]] | None = None
        self.from_entry_points = False
        """True when exactly the built-ins and the selected entry points were loaded."""
        self.selection_warnings: list[str] = []
        """Names in CMX_LOAD_PLUGINS / CMX_DISABLE_PLUGINS that are not installed."""
        self.on_failure: Callable[[str], None] | None = None
        """Told one warning line when a plugin fails after loading (a registration hook
        raised when its kind was first asked for); the CLI's registry prints it to stderr."""

    def _kind(self, kind: str) -> dict[str, Any]:
        if kind not in self._collected:
            self._collected.add(kind)
            self._providers[kind].update(_core_providers(kind))
            for impl in getattr(self.hook, KINDS[kind]).get_hookimpls():
                _call_register(self, impl, kind, self._providers[kind])
        return self._providers[kind]

    @property
    def steps(self) -> dict[str, StepType]:
        return self._kind("steps")

    @property
    def detectors(self) -> dict[str, Detector]:
        return self._kind("detectors")

    @property
    def executors(self) -> dict[str, Executor]:
        return self._kind("executors")

    @property
    def commands(self) -> dict[str, Command]:
        return self._kind("commands")

    @property
    def exporters(self) -> dict[str, Exporter]:
        return self._kind("exporters")

    @property
    def suites(self) -> dict[str, Suite]:
        """Suites by name (``benchmark.suite``): cmx-core's ``custom`` and the plugins'."""
        return self._kind("suites")

    @property
    def sandboxes(self) -> dict[str, SandboxBackend]:
        """Sandbox backends by name: cmx-core's ``bubblewrap`` and the plugins'."""
        return self._kind("sandboxes")

    def sandbox(self, name: str | None = None) -> Sandbox:
        """The sandbox of backend ``name`` (default ``bubblewrap``), or a UsageError listing the known ones."""
        from cmx_core.sandbox.backend import DEFAULT_BACKEND, pick_backend

        return pick_backend(self.sandboxes, name or DEFAULT_BACKEND)

    @property
    def recipe_paths(self) -> list[tuple[str, Path]]:
        if self._recipe_paths is None:
            self._recipe_paths = _collect_recipe_paths(self)
        return self._recipe_paths

    @property
    def conflicts(self) -> dict[str, tuple[str, ...]]:
        """Provider names registered by two plugins (after collecting every kind)."""
        self.collect_all()
        return self._conflicts

    def collect_all(self) -> None:
        """Call every registration hook (for listings, checks and strict mode)."""
        for kind in KINDS:
            self._kind(kind)
        _ = self.recipe_paths

    @property
    def hook(self) -> Any:
        return self.manager.hook

    def errors(self) -> dict[str, str]:
        self.collect_all()
        return {name: info.error for name, info in self.plugins.items() if info.error}

    def step(self, name: str) -> StepType:
        """The step type ``name``, or a PluginError naming the conflict or the gap."""
        steps = self.steps
        if name in self._conflicts:
            owners = " and ".join(self._conflicts[name])
            raise PluginError(
                f"step type '{name}' is registered by both {owners}; uninstall one of them "
                "or limit loading with CMX_LOAD_PLUGINS"
            )
        try:
            return steps[name]
        except KeyError:
            raise PluginError(missing_provider_message("step type", name)) from None


def missing_provider_message(kind: str, name: str) -> str:
    """One line saying nothing provides ``name`` and, via registry.yaml, who would."""
    hint = ""
    try:
        from cmx_core.registry import install_hint

        hint = install_hint(kind, name)
    except ImportError:
        pass
    return f"no loaded plugin provides {kind} '{name}'" + (f"; {hint}" if hint else "")


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
    import sys

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
            lines.append(_failure_line(name, info))
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
    from cmx_core import builtin

    _add(registry, CORE, CORE, __version__, builtin)
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
        import importlib

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
    import json

    from cmx_core import paths
    from cmx_core.command_index import DISCOVERY_FILE, discovery_fingerprint

    fingerprint = discovery_fingerprint()
    cache_file = paths.cache_dir() / DISCOVERY_FILE
    try:
        record = json.loads(cache_file.read_text())
        if record.get("fingerprint") == fingerprint:
            return [EntrySpec(**e) for e in record["entries"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    entries = _scan_entry_points()
    from cmx_core.datautil import atomic_write

    try:
        atomic_write(cache_file, json.dumps({"fingerprint": fingerprint, "entries": [e._asdict() for e in entries]}))
    except OSError:
        pass
    return entries


def _scan_entry_points() -> list[EntrySpec]:
    from importlib import metadata

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
    from cmx_core.command_index import write_summaries

    commands = [(c.name, c.summary) for c in registry.commands.values()]
    files = []
    for name in {c.plugin for c in registry.commands.values()}:
        module = registry.manager.get_plugin(name)
        path = getattr(module, "__file__", None)
        if path:
            files.append(path)
    write_summaries(commands, files)


def _load_entry_point(registry: Registry, entry: EntrySpec) -> None:
    import time

    start = time.perf_counter()
    try:
        if entry.refusal:
            raise PluginError(entry.refusal)
        module = entry.load()
    except Exception as exc:  # noqa: BLE001 - any import failure must not stop the CLI
        import traceback

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
    from packaging.requirements import Requirement

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
        import traceback

        if registry.manager.is_registered(module):
            registry.manager.unregister(module)
        registry.plugins[name] = PluginInfo(
            name, dist, version, getattr(module, "__name__", str(module)), error=_one_line(exc),
            traceback="".join(traceback.format_exception(exc)),
        )
        return
    registry.plugins[name] = PluginInfo(name, dist, version, getattr(module, "__name__", "?"))


def _collect_recipe_paths(registry: Registry) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for impl in registry.hook.cmx_recipe_paths.get_hookimpls():
        try:
            paths = impl.function() or []
        except Exception as exc:  # noqa: BLE001
            _fail(registry, impl.plugin_name, exc)
            continue
        found.extend((impl.plugin_name, Path(p)) for p in paths)
    return found


def _call_register(registry: Registry, impl: Any, kind: str, target: dict[str, Any]) -> None:
    plugin = impl.plugin_name
    info = registry.plugins[plugin]
    added: list[str] = []

    def register(provider: P) -> None:
        if kind == "suites":
            from cmx_core.results.suites import check_suite

            check_suite(provider, info.distribution)
        stamped = dataclasses.replace(provider, plugin=plugin, version=info.version)
        if kind == "suites":
            _put_suite(registry, kind, target, stamped)  # type: ignore[arg-type]
        else:
            _put(registry, kind, target, stamped)
        added.append(provider.name)

    try:
        impl.function(register=register)
    except Exception as exc:  # noqa: BLE001
        _fail(registry, plugin, exc)
        return
    if added:
        registry.plugins[plugin].provides.setdefault(kind, []).extend(added)


def _put(registry: Registry, kind: str, target: dict[str, Any], provider: Any) -> None:
    """Add a provider; a plugin may replace a core built-in, two plugins conflict."""
    existing = target.get(provider.name)
    if existing is None or existing.plugin == CORE:
        target[provider.name] = provider
        return
    owners = (existing.plugin, provider.plugin)
    registry._conflicts[provider.name] = owners
    for owner in owners:
        info = registry.plugins[owner]
        registry.plugins[owner] = dataclasses.replace(
            info, error=f"{kind[:-1]} '{provider.name}' is also registered by "
            f"{owners[1] if owner == owners[0] else owners[0]}"
        )
    target.pop(provider.name, None)


def _core_providers(kind: str) -> dict[str, Any]:
    """Providers cmx-core has without a plugin module: the built-in suites and sandboxes."""
    if kind == "sandboxes":
        from cmx_core.sandbox import BUILTIN

        return {box.name: dataclasses.replace(box, plugin=CORE, version=__version__) for box in BUILTIN}
    if kind != "suites":
        return {}
    from cmx_core.results.suites import CORE_SUITES

    return {suite.name: dataclasses.replace(suite, plugin=CORE, version=__version__) for suite in CORE_SUITES}


def _put_suite(registry: Registry, kind: str, target: dict[str, Any], suite: Suite) -> None:
    """Like :func:`_put`; besides, two suites of two plugins cannot own the same section."""
    clash = next((s for s in target.values() if suite.section and s.section == suite.section
                  and s.name != suite.name and s.plugin != CORE), None)
    if clash is None:
        _put(registry, kind, target, suite)
        return
    owners = (clash.plugin, suite.plugin)
    registry._conflicts[f"section {suite.section}"] = owners
    for owner, other, mine, theirs in ((clash.plugin, suite.plugin, clash, suite),
                                       (suite.plugin, clash.plugin, suite, clash)):
        info = registry.plugins[owner]
        registry.plugins[owner] = dataclasses.replace(
            info, error=f"suite '{mine.name}' claims result section '{suite.section}', which "
            f"suite '{theirs.name}' of {other} also claims")
    target.pop(clash.name, None)


def _fail(registry: Registry, plugin: str, exc: BaseException) -> None:
    import traceback

    info = registry.plugins[plugin]
    already = info.error is not None
    registry.plugins[plugin] = dataclasses.replace(info, error=_one_line(exc),
                                                   traceback="".join(traceback.format_exception(exc)))
    if registry.on_failure is not None and not already:
        registry.on_failure(_failure_line(plugin, registry.plugins[plugin]))


def _failure_line(name: str, info: PluginInfo) -> str:
    return (f"cmx: warning: plugin '{name}' ({info.distribution} {info.version}) failed to load: "
            f"{info.error}; `cmx plugins info {name}` shows the traceback")


def prune_resources(referenced: frozenset[str], dry_run: bool = False) -> list[str]:
    """Every plugin's ``cmx_prune_resources``: one line per thing removed (or that would be)."""
    answers = get_registry().hook.cmx_prune_resources(referenced=referenced, dry_run=dry_run)
    return [str(line) for answer in answers for line in answer or ()]


def call_event(name: str, **kwargs: Any) -> None:
    """Fire an event hook of the process-wide registry, one implementation at a time: a
    failing observer is reported on stderr by plugin and hook, never fatal, and never stops
    the other plugins' implementations (:mod:`cmx_core.plugin_events`)."""
    from cmx_core.plugin_events import fire

    fire(getattr(get_registry().hook, name), kwargs)
