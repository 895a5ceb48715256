"""The hooks a cmx plugin can implement (pluggy, project name ``cmx``).

Registration hooks receive a ``register`` callback and call it once per provider; event
hooks are called while a run goes on. Every hook is optional. A plugin module exposes its
implementations with :data:`hookimpl` and is found through the ``cmx`` entry-point group::

    [project.entry-points.cmx]
    myplugin = "cmx_myplugin.plugin"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from cmx_core.providers.types import Command, Detector, Exporter, Launcher, StepType, Suite

if TYPE_CHECKING:  # not imported at run time: every command imports this module
    from cmx_core.plugins.registry import Executor
    from cmx_core.sandbox.backend import SandboxBackend

PROJECT = "cmx"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def cmx_register_steps(register: Callable[[StepType], None]) -> None:
    """Register step types that recipes can ``use:``.

    Called once when the plugin manager is first used. Two plugins registering the same
    step name is a load error naming both.

    Example::

        @hookimpl
        def cmx_register_steps(register):
            register(StepType(name="demo.hello", summary="Say hello", run=_hello))
    """


@hookspec
def cmx_register_detectors(register: Callable[[Detector], None]) -> None:
    """Register detectors, each producing one top-level fact (``facts.<name>``).

    A plugin detector replaces cmx-core's built-in one of the same name (core ships minimal
    ``os``, ``cpu``, ``memory`` and ``python`` detectors); two plugins registering the same
    name is a load error.

    Example::

        @hookimpl
        def cmx_register_detectors(register):
            register(Detector(name="gpus", summary="NVIDIA GPUs via NVML", detect=_gpus))
    """


@hookspec
def cmx_register_executors(register: Callable[[Executor], None]) -> None:
    """Register executors that run a whole plan elsewhere (a container, Slurm, Ray...).

    ``cmx run --executor NAME`` picks one; the built-in ``local`` executor is the default.

    Example::

        @hookimpl
        def cmx_register_executors(register):
            register(Executor(name="docker", summary="Run inside a container", run=_run))
    """


@hookspec
def cmx_register_launchers(register: Callable[[Launcher], None]) -> None:
    """Register launchers: how the ranks of a distributed run start on each node
    (``torchrun``, ``mpirun``...), composed with any executor, which places the nodes.

    A step names one (``launcher: torchrun``) and finds it in ``StepContext.launchers``;
    cmx-core registers ``torchrun``, ``mpirun``, ``env`` and ``none``.

    Example::

        @hookimpl
        def cmx_register_launchers(register):
            register(Launcher(name="srun", summary="srun -n N", wrap=_srun))
    """


@hookspec
def cmx_register_commands(register: Callable[[Command], None]) -> None:
    """Register extra ``cmx`` subcommands.

    Called only when the CLI parses arguments, never from the Python API.

    Example::

        @hookimpl
        def cmx_register_commands(register):
            register(Command(name="detect", summary="Print facts", configure=_cfg, run=_run))
    """


@hookspec
def cmx_register_exporters(register: Callable[[Exporter], None]) -> None:
    """Register formats for ``cmx results export --format NAME``.

    Example::

        @hookimpl
        def cmx_register_exporters(register):
            register(Exporter(name="mlperf-submission", summary="MLPerf tree", export=_export))
    """


@hookspec
def cmx_register_suites(register: Callable[[Suite], None]) -> None:
    """Register benchmark suites (``benchmark.suite``) and the JSON Schema of each one's
    result section (a top-level key of ``result.json`` the suite owns).

    Each schema is checked when it is registered (a valid JSON Schema, a section name that
    is a lower-case identifier and not an envelope key); a broken one, or a suite name or
    section registered by two plugins, is a load error naming the plugin. cmx then
    validates every result's section against its suite's schema, and refuses a result
    whose suite no loaded plugin registers. cmx-core itself registers ``custom``.

    Example::

        @hookimpl
        def cmx_register_suites(register):
            register(Suite(name="helm", summary="HELM scenarios", section="helm",
                           schema={"type": "object", "required": ["scenario"],
                                   "properties": {"scenario": {"type": "string"}}}))
    """


@hookspec
def cmx_register_sandboxes(register: Callable[[SandboxBackend], None]) -> None:
    """Register sandbox backends that run untrusted code confined (``docs/sandbox.md``).

    A suite picks one by name with ``get_sandbox(name)`` from ``cmx_core.api``; cmx-core's
    built-in ``bubblewrap`` is the default. A plugin backend replaces a built-in of the same
    name; two plugins registering the same name is a load error.

    Example::

        @hookimpl
        def cmx_register_sandboxes(register):
            register(SandboxBackend(name="docker", summary="a container per run (GPUs)",
                                    create=DockerSandbox))
    """


@hookspec
def cmx_recipe_paths() -> list[Path]:
    """Return directories holding this plugin's recipes (``*.yaml``, searched recursively).

    Plugin recipes shadow cmx-core's recipes of the same name and are shadowed by
    ``--recipes`` and ``CMX_RECIPES_PATH``.

    Example::

        @hookimpl
        def cmx_recipe_paths():
            return [Path(__file__).parent / "recipes"]
    """
    return []


@hookspec
def cmx_repo_recipes(tree: Path) -> list[Path] | None:
    """Recognise a recipe repository that is not made of cmx recipes and return the
    directories of cmx recipes translated from it, or None when it is not yours.

    ``tree`` is a checked-out commit of a repository added with ``cmx repo add``; it never
    changes. The first plugin returning a list translates it (cmx-cm: a CM/MLC script
    collection), so adding such a repository needs no import step (docs/repos.md).

    Example::

        @hookimpl
        def cmx_repo_recipes(tree):
            return [translate(tree)] if (tree / "manifest.toml").is_file() else None
    """
    return None


@hookspec
def cmx_node_started(node_id: str, recipe: str, cached: bool) -> None:
    """Called just before a plan node runs (or is taken from the cache when ``cached``).

    Example::

        @hookimpl
        def cmx_node_started(node_id, recipe, cached):
            print(f"-> {node_id}", file=sys.stderr)
    """


@hookspec
def cmx_node_finished(
    node_id: str, recipe: str, outputs: Mapping[str, Any], wall_s: float, cached: bool
) -> None:
    """Called after a plan node finished successfully, with its declared outputs.

    Example::

        @hookimpl
        def cmx_node_finished(node_id, recipe, outputs, wall_s, cached):
            metrics.observe(node_id, wall_s)
    """


@hookspec
def cmx_node_failed(node_id: str, recipe: str, error: str, wall_s: float) -> None:
    """Called when a plan node failed (a step raised or exited non-zero), with the one-line
    error; ``cmx_node_finished`` is not called for it. Like every event hook, each plugin's
    implementation is called on its own: one that raises is reported and the others still run.

    Example::

        @hookimpl
        def cmx_node_failed(node_id, recipe, error, wall_s):
            alerts.send(f"{node_id} failed after {wall_s:.1f} s: {error}")
    """


@hookspec
def cmx_prune_resources(referenced: frozenset[str], dry_run: bool) -> list[str]:
    """Remove what the plugin keeps outside the cmx cache (container images...) that no cache
    entry references; called by ``cmx cache prune --images``. ``referenced`` holds every
    string value of every cache entry's outputs (image tags, ids, paths); return one line per
    thing removed (or, with ``dry_run``, that would be). Core stays ignorant of what they are.

    Example::

        @hookimpl
        def cmx_prune_resources(referenced, dry_run):
            stale = [tag for tag in my_images() if tag not in referenced]
            if not dry_run:
                remove(stale)
            return [f"image {tag}" for tag in stale]
    """
    return []  # a hookspec's body never runs


@hookspec
def cmx_result_written(path: Path, document: Mapping[str, Any]) -> None:
    """Called after a validated ``result.json`` was written and indexed.

    Example::

        @hookimpl
        def cmx_result_written(path, document):
            upload(path)
    """
