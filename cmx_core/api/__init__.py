"""cmx-core's public API for plugins and scripts. Plugins import only from here (and
:mod:`cmx_core.errors`, whose classes are here too).

The names come from one table, :data:`cmx_core.api.table.GROUPS`, grouped by what a plugin
author needs: the errors; the provider contract (``hookimpl``, :class:`StepType`,
:class:`StepContext`, :class:`Detector`, :class:`Launcher`, ... and what providers are
handed: :class:`Registry`, :class:`Plan`, :class:`FactStore`); the executor contract
(:class:`Executor`, :class:`ExecutionContext`, :class:`ExecutionRequest`,
:class:`RemoteExecutor`, the recovery and fault names); results (:class:`ResultPart`,
:class:`Metric`, ``validate_document``); the sandbox for untrusted code (``get_sandbox``,
:class:`SandboxSpec`, :class:`Limits`, ...); the engine's entry points for scripts (``run``
with keyword arguments, ``run_request(RunRequest(...))``, ``plan``, ``explain``,
``run_sweep(SweepRequest(...))``, ...); and the models suites share (``resnet50``).
docs/plugins.md explains them. Every name is imported on first use, so importing this
module costs only the table.

Helpers that are not the contract have submodules: :mod:`cmx_core.api.display` (tables and
numbers that fit the terminal), :mod:`cmx_core.api.archives` (tar archives unpacked through
tarfile's filters), :mod:`cmx_core.api.files` (a file written whole or not at all) and
:mod:`cmx_core.api.sandboxing` (what a sandbox backend or a judge reuses).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cmx_core.api.table import entries

if TYPE_CHECKING:  # written by scripts/api_table.py from cmx_core/api/table.py
    # one import per module (the sorter keeps out)
    # isort: off
    from cmx_core.cache.store import (
        cached_recipes as cached_recipes,
    )
    from cmx_core.errors import (
        CacheError as CacheError,
        CmxError as CmxError,
        Interrupted as Interrupted,
        PluginError as PluginError,
        RecipeError as RecipeError,
        ResolveError as ResolveError,
        ResultsError as ResultsError,
        StepFailed as StepFailed,
        UsageError as UsageError,
    )
    from cmx_core.facts.store import (
        FactStore as FactStore,
    )
    from cmx_core.faults.kinds.kill_worker import (
        KILL_WORKER as KILL_WORKER,
    )
    from cmx_core.models.resnet import (
        resnet50 as resnet50,
    )
    from cmx_core.paths import (
        cache_dir as cache_dir,
        data_dir as data_dir,
    )
    from cmx_core.plan.planner import (
        Plan as Plan,
        PlanNode as PlanNode,
    )
    from cmx_core.plugins.extras import (
        require_extra as require_extra,
    )
    from cmx_core.plugins.hookspecs import (
        hookimpl as hookimpl,
    )
    from cmx_core.plugins.loader import (
        get_sandbox as get_sandbox,
    )
    from cmx_core.plugins.local_source import (
        project_name as project_name,
    )
    from cmx_core.plugins.registry import (
        ExecutionContext as ExecutionContext,
        ExecutionRequest as ExecutionRequest,
        Executor as Executor,
        Registry as Registry,
    )
    from cmx_core.providers.recovery import (
        FaultClass as FaultClass,
        FaultKind as FaultKind,
        RetryPolicy as RetryPolicy,
    )
    from cmx_core.providers.types import (
        CachedMeasurement as CachedMeasurement,
        Command as Command,
        ConditionalDep as ConditionalDep,
        Detector as Detector,
        ExecutionOutcome as ExecutionOutcome,
        ExecutorSettings as ExecutorSettings,
        Exporter as Exporter,
        Launcher as Launcher,
        MetricsSink as MetricsSink,
        NoMetrics as NoMetrics,
        NoSettings as NoSettings,
        NodeCommand as NodeCommand,
        NodeResult as NodeResult,
        RankLayout as RankLayout,
        RunError as RunError,
        StepContext as StepContext,
        StepType as StepType,
        Suite as Suite,
    )
    from cmx_core.providers.values import (
        Artifact as Artifact,
        Capabilities as Capabilities,
        Metric as Metric,
        ResultPart as ResultPart,
        StepOutput as StepOutput,
    )
    from cmx_core.recipes.resources import (
        NO_RESOURCES as NO_RESOURCES,
        Resources as Resources,
        node_resources as node_resources,
        plan_resources as plan_resources,
    )
    from cmx_core.recipes.template import (
        register_template_function as register_template_function,
    )
    from cmx_core.results.comparable import (
        comparable as comparable,
        comparable_across_sweeps as comparable_across_sweeps,
    )
    from cmx_core.results.secrets import (
        TOKEN_PATTERNS as TOKEN_PATTERNS,
        is_secret_name as is_secret_name,
    )
    from cmx_core.results.validate import (
        validate_document as validate_document,
    )
    from cmx_core.run.engine import (
        detect_facts as detect_facts,
        explain as explain,
        list_recipes as list_recipes,
        plan as plan,
        plan_plugins as plan_plugins,
        write_lock as write_lock,
    )
    from cmx_core.run.processes import (
        run_step_process as run_step_process,
    )
    from cmx_core.run.remote import (
        Fetched as Fetched,
        JobStatus as JobStatus,
        LostJobs as LostJobs,
        RemoteExecutor as RemoteExecutor,
        RemoteJob as RemoteJob,
        WorkerKill as WorkerKill,
        fold as fold,
        job_fault as job_fault,
        job_policy as job_policy,
        scheduler_retries as scheduler_retries,
        set_aside as set_aside,
    )
    from cmx_core.run.request import (
        RunRequest as RunRequest,
    )
    from cmx_core.sandbox import (
        Limits as Limits,
        Sandbox as Sandbox,
        SandboxBackend as SandboxBackend,
        SandboxResult as SandboxResult,
        SandboxSpec as SandboxSpec,
        SandboxUser as SandboxUser,
        Verdict as Verdict,
    )
    from cmx_core.sweep.request import (
        SweepRequest as SweepRequest,
    )
    from cmx_core.sweep.runner import (
        point_command as point_command,
        run_sweep as run_sweep,
    )
    from cmx_core.telemetry.collector import (
        TelemetrySettings as TelemetrySettings,
    )
    from cmx_core.telemetry.energy import (
        Meter as Meter,
    )
    import cmx_core.run.engine
    # isort: on
    run = cmx_core.run.engine.run_tags
    run_request = cmx_core.run.engine.run


_WHERE = {name: (module, attribute) for module, attribute, name in entries()}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    """A name of the table, imported from its module on first use (and kept)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'cmx_core.api' has no attribute {name!r}")
    module, attribute = _WHERE[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
