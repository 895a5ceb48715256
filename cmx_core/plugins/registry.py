"""The registry of loaded plugins: every provider by kind and name, and how a plugin's
registration hook puts its providers there (a core built-in may be replaced, two plugins
clash). It also holds the executor contract, :class:`Executor`, the :class:`ExecutionContext`
its ``check_plan``, ``describe`` and ``render_many`` are handed and the
:class:`ExecutionRequest` its ``run`` is handed, since a context carries the registry.

Loading (entry points, the process-wide registry) is :mod:`cmx_core.plugins.loader`.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from cmx_core import __version__
from cmx_core.errors import PluginError
from cmx_core.plugins.hook_calls import one_line as _one_line
from cmx_core.providers.recovery import NO_RECOVERY, FaultKind, Recovery
from cmx_core.providers.table import ProviderTable
from cmx_core.providers.types import (
    Command,
    Detector,
    ExecutionOutcome,
    ExecutorSettings,
    Exporter,
    Launcher,
    NoSettings,
    StepType,
    Suite,
)
from cmx_core.providers.values import Capabilities
from cmx_core.results.suites import CORE_SUITES, check_suite
from cmx_core.sandbox import BUILTIN as BUILTIN_SANDBOXES
from cmx_core.sandbox.backend import DEFAULT_BACKEND, pick_backend

if TYPE_CHECKING:
    from cmx_core.facts.store import FactStore
    from cmx_core.plan.planner import Plan
    from cmx_core.sandbox.backend import Sandbox, SandboxBackend
    from cmx_core.telemetry.collector import TelemetrySettings

CORE = "cmx-core"
P = TypeVar("P", StepType, Detector, "Executor", Command, Exporter, Suite, "SandboxBackend", Launcher)


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
    "launchers": "cmx_register_launchers",
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
    def detectors(self) -> ProviderTable[Detector]:
        """Detectors by fact name, with registry.yaml's hint for a fact none provides."""
        return ProviderTable(self._kind("detectors"), lambda name: install_hint("fact", name))

    @property
    def executors(self) -> dict[str, Executor]:
        return self._kind("executors")

    @property
    def launchers(self) -> dict[str, Launcher]:
        """Launchers by name (``torchrun``, ``mpirun``, ``env``, ``none``: cmx-core's; the plugins')."""
        return self._kind("launchers")

    @property
    def commands(self) -> dict[str, Command]:
        return self._kind("commands")

    @property
    def exporters(self) -> dict[str, Exporter]:
        return self._kind("exporters")

    @property
    def suites(self) -> ProviderTable[Suite]:
        """Suites by name (``benchmark.suite``): cmx-core's ``custom`` and the plugins',
        with registry.yaml's hint for a suite that none of them provides."""
        return ProviderTable(self._kind("suites"), lambda name: install_hint("suite", name))

    @property
    def sandboxes(self) -> dict[str, SandboxBackend]:
        """Sandbox backends by name: cmx-core's ``bubblewrap`` and the plugins'."""
        return self._kind("sandboxes")

    def sandbox(self, name: str | None = None) -> Sandbox:
        """The sandbox of backend ``name`` (default ``bubblewrap``), or a UsageError listing the known ones."""
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


def install_hint(kind: str, name: str) -> str:
    """registry.yaml's hint for a provider no loaded plugin has (an error path only)."""
    # deferred: reading registry.yaml needs PyYAML and the file's model, only on an error
    from cmx_core.plugins.registry_yaml import install_hint as from_registry_file

    return from_registry_file(kind, name)


def missing_provider_message(kind: str, name: str) -> str:
    """One line saying nothing provides ``name`` and, via registry.yaml, who would."""
    hint = install_hint(kind, name)
    return f"no loaded plugin provides {kind} '{name}'" + (f"; {hint}" if hint else "")


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
        return {box.name: dataclasses.replace(box, plugin=CORE, version=__version__) for box in BUILTIN_SANDBOXES}
    if kind != "suites":
        return {}
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
    info = registry.plugins[plugin]
    already = info.error is not None
    registry.plugins[plugin] = dataclasses.replace(info, error=_one_line(exc),
                                                   traceback="".join(traceback.format_exception(exc)))
    if registry.on_failure is not None and not already:
        registry.on_failure(failure_line(plugin, registry.plugins[plugin]))


def failure_line(name: str, info: PluginInfo) -> str:
    return (f"cmx: warning: plugin '{name}' ({info.distribution} {info.version}) failed to load: "
            f"{info.error}; `cmx plugins info {name}` shows the traceback")


@dataclass(frozen=True)
class ExecutionContext:
    """What an executor knows about a plan: handed to ``check_plan`` and ``describe``, and
    carried by every :class:`ExecutionRequest` (``request.context``) to ``run``.

    ``plan`` is the resolved :class:`cmx_core.plan.planner.Plan`; ``settings`` an instance of
    the executor's own :class:`ExecutorSettings` subclass, already validated; ``facts`` the
    :class:`cmx_core.facts.store.FactStore` the plan was resolved against (a facts file, or
    this machine); ``registry`` the loaded plugins (another provider, such as the ``docker``
    executor a cluster executor asks for an image tag, is reached through it, never through a
    process-wide registry). ``telemetry`` says how the run is sampled (None: from the
    environment, docs/telemetry.md) and ``recovery`` is the command line's recovery policy and
    fault injections (docs/faults.md); ``cmx plan`` leaves both at their defaults.
    """

    plan: Plan
    settings: ExecutorSettings
    facts: FactStore
    registry: Registry
    telemetry: TelemetrySettings | None = None
    recovery: Recovery = NO_RECOVERY

    @property
    def gpus(self) -> Any:
        """The ``gpus`` fact the plan was resolved against (None when not detected)."""
        return self.facts.try_get("gpus")


@dataclass(frozen=True)
class ExecutionRequest:
    """What an executor is asked to run: the :class:`ExecutionContext` (plan, settings,
    facts, registry, telemetry and recovery) and this run's own places and switches.

    ``lock_path`` is the run's ``lock.json``, already written (a remote executor ships it and
    runs ``cmx run --lock`` on the far side); ``run_dir`` the run directory; ``jobs``,
    ``use_cache`` and ``refresh`` the command line's ``-j``, ``--no-cache`` and ``--refresh``.
    """

    context: ExecutionContext
    run_dir: Path
    lock_path: Path
    run_id: str
    jobs: int = 1
    use_cache: bool = True
    refresh: bool = False


@dataclass(frozen=True)
class Executor:
    """Runs a plan somewhere: the local machine (built in), a container, Slurm, Ray...

    ``run`` gets a typed :class:`ExecutionRequest` and returns an :class:`ExecutionOutcome`;
    it never writes ``result.json`` itself. A step failure is reported in
    ``ExecutionOutcome.error`` (the engine records an error result); a failure of the
    executor itself (an image that does not build, a job that never starts) is raised as a
    :class:`cmx_core.errors.CmxError` and recorded as an error result too. ``settings`` is the
    executor's :class:`ExecutorSettings` subclass. Remote executors derive from
    :class:`cmx_core.run.remote.RemoteExecutor`, which implements ``run``. ``check_plan``
    (optional) is handed the :class:`ExecutionContext` by ``cmx plan`` and before a run
    starts, and raises a CmxError for what would make the run fail on its input (an unknown
    container template, say). ``describe`` (optional) is handed the same context and says, for
    ``cmx plan``, how the plan would run: for a container the image tag, the GPUs requested,
    the mounts, the network and the limits. Everything an executor needs comes in the context
    or the request: no executor asks a process-wide registry.

    ``run_many`` (optional) runs many prepared requests as one batch (a Slurm job array, Ray
    tasks over one connection): ``cmx sweep`` calls it once with every point's request (each
    with its own run directory, lock and run id, all with the same settings) and the sweep's
    ``-j`` as the most points to run at once, and records each outcome as ``run`` would be.
    It returns one :class:`ExecutionOutcome` per request, in order; a failed point is an
    outcome with ``error``, not an exception. It raises a :class:`cmx_core.errors.CmxError`
    only when the batch as a whole cannot run (every point is then an error result), and
    :class:`cmx_core.errors.Interrupted` after cancelling what it started on Ctrl-C. Without
    it, a sweep runs one ``cmx run`` process per point.

    ``run_each`` (optional) is ``run_many`` handing each outcome, with its request's index,
    to its third argument as soon as it is known (in any order) instead of returning them: the
    sweep records each point then, so a driver killed mid-batch loses no point that had ended.
    It must hand over exactly one outcome per request. A sweep uses it over ``run_many``.

    ``render_many`` (optional) writes what ``run_many`` would submit for these contexts (a
    sweep's checked points, in order, all with the same settings) without running anything:
    ``cmx sweep ... --executor-opt render=DIR`` calls it instead of running the sweep. It
    returns the files it wrote.
    """

    name: str
    summary: str
    run: Callable[[ExecutionRequest], ExecutionOutcome]
    settings: type[ExecutorSettings] = NoSettings
    check_plan: Callable[[ExecutionContext], None] | None = None
    describe: Callable[[ExecutionContext], Mapping[str, Any]] | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    run_many: Callable[[Sequence[ExecutionRequest], int], tuple[ExecutionOutcome, ...]] | None = None
    run_each: Callable[[Sequence[ExecutionRequest], int, Callable[[int, ExecutionOutcome], None]], None] | None = None
    render_many: Callable[[Sequence[ExecutionContext], int], Sequence[Path]] | None = None
    version: str = ""
    plugin: str = ""
    runs_here: bool = False
    """True when the plan runs on this machine (``local``, a container): such a run refuses a
    ``--facts`` file that contradicts this machine (:mod:`cmx_core.run.facts_check`)."""
    injects: frozenset[FaultKind] = frozenset()
    """The faults the executor injects itself, beyond those the steps' engine applies
    (``kill-worker`` for a cluster executor that kills the job's worker: docs/faults.md)."""
    adopts: bool = False
    """True when the batch entry takes over a request whose run directory already holds a
    job an earlier driver submitted (a sweep driver killed while its batch ran on): it waits
    for that job instead of submitting it again. ``cmx sweep --resume`` then hands such a
    point over with its earlier run directory and run id."""
    batch_retries: bool = False
    """True when the batch entry applies each run's recovery policy to its lost jobs itself
    (cmx-slurm resubmits a job array's lost tasks): a sweep with ``--retries`` then runs as
    one batch; otherwise it runs one ``cmx run`` process per point, whose executor does."""


