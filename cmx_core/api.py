"""cmx-core's public API for plugins and scripts. Plugins import only from here.

Providers and values: :class:`StepType`, :class:`Detector`, :class:`Executor`,
:class:`Command`, :class:`Exporter`, :class:`Suite`, :class:`Launcher` (with the
:class:`RankLayout` it is given and the :class:`NodeCommand` it returns), :class:`Capabilities`,
:class:`StepContext`, :class:`StepOutput`, :class:`ResultPart`, :class:`Metric`,
:class:`Artifact`. The executor contract: :class:`ExecutionContext`, :class:`ExecutionRequest`,
:class:`ExecutionOutcome`, :class:`NodeResult`, :class:`RunError`,
:class:`ExecutorSettings`, and (imported lazily) :class:`RemoteExecutor` with
:class:`RemoteJob` and :class:`JobStatus`. Errors: :class:`CmxError` and its
subclasses. Markers: :data:`hookimpl`. Engine entry points (imported lazily):
``run`` (keyword arguments: ``run("demo,sort", {"size": 5}, executor="local")``, the fields of
:class:`RunRequest`), ``run_request(RunRequest(...))``, ``plan``, ``explain``, ``list_recipes``,
``detect_facts``; ``run_sweep(SweepRequest(...))``; the types a provider is handed
(``Plan``, ``PlanNode``, ``Registry``, ``FactStore``); ``plan_plugins(plan, registry)``, the
plugins a plan uses; ``register_template_function(name, function)``, a function recipe
templates may call (docs/recipes.md, Templates); the result validator
``validate_document(document, source, suites)`` for tools that read or check result documents.
The sandbox for untrusted code (imported lazily; ``docs/sandbox.md``): ``get_sandbox(name)``,
:class:`Sandbox`, :class:`SandboxBackend` (what ``cmx_register_sandboxes`` registers),
:class:`SandboxSpec`, :class:`Limits`, :class:`SandboxUser`, :class:`SandboxResult`,
:class:`Verdict`. Faults (``docs/faults.md``): :class:`FaultClass` (how a failed attempt
failed), :class:`FaultKind` (an injectable fault) and :data:`KILL_WORKER`, the kind a cluster
executor injects itself (its ``Executor.injects``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cmx_core.errors import (
    CacheError,
    CmxError,
    Interrupted,
    PluginError,
    RecipeError,
    ResolveError,
    ResultsError,
    StepFailed,
    UsageError,
)
from cmx_core.plugins.hookspecs import hookimpl
from cmx_core.plugins.registry import ExecutionContext, ExecutionRequest, Executor
from cmx_core.providers.types import (
    CachedMeasurement,
    Command,
    ConditionalDep,
    Detector,
    ExecutionOutcome,
    ExecutorSettings,
    Exporter,
    Launcher,
    MetricsSink,
    NodeCommand,
    NodeResult,
    NoMetrics,
    NoSettings,
    RankLayout,
    RunError,
    StepContext,
    StepType,
    Suite,
)
from cmx_core.providers.values import Artifact, Capabilities, Metric, ResultPart, StepOutput

if TYPE_CHECKING:  # the lazy names, for type checkers
    from cmx_core.facts.store import FactStore
    from cmx_core.faults.kinds.kill_worker import KILL_WORKER
    from cmx_core.models.resnet import resnet50
    from cmx_core.paths import cache_dir, data_dir
    from cmx_core.plan.planner import Plan, PlanNode
    from cmx_core.plugins.extras import require_extra
    from cmx_core.plugins.loader import get_sandbox
    from cmx_core.plugins.registry import Registry
    from cmx_core.providers.recovery import FaultClass, FaultKind
    from cmx_core.recipes.resources import NO_RESOURCES, Resources, node_resources, plan_resources
    from cmx_core.recipes.template import register_template_function
    from cmx_core.results.comparable import comparable, comparable_across_sweeps
    from cmx_core.results.grid import Column, Grid, fit, fit_text, width_for
    from cmx_core.results.numbers import fmt_number
    from cmx_core.results.secrets import TOKEN_PATTERNS, is_secret_name
    from cmx_core.run.engine import plan_plugins, write_lock
    from cmx_core.run.engine import run as run_request
    from cmx_core.run.engine import run_tags as run
    from cmx_core.run.remote import (
        Fetched,
        JobStatus,
        LostJobs,
        RemoteExecutor,
        RemoteJob,
        WorkerKill,
        fold,
        job_fault,
        set_aside,
    )
    from cmx_core.run.request import RunRequest
    from cmx_core.sandbox import (
        Limits,
        Sandbox,
        SandboxBackend,
        SandboxResult,
        SandboxSpec,
        SandboxUser,
        Verdict,
        check_spec,
    )
    from cmx_core.sandbox.cpus import pick_cpus
    from cmx_core.sandbox.session import BubblewrapSession, session_unavailable
    from cmx_core.sandbox.tarsafe import FilterError, data_filter, extract_all, tar_filter
    from cmx_core.sandbox.verdict import Ending, decide
    from cmx_core.sweep.request import SweepRequest
    from cmx_core.sweep.runner import point_command, run_sweep
    from cmx_core.telemetry.collector import TelemetrySettings
    from cmx_core.telemetry.energy import Meter


__all__ = [
    "Artifact", "CacheError", "CachedMeasurement", "Capabilities", "CmxError", "Command", "Detector",
    "ExecutionContext", "ExecutionOutcome", "ExecutionRequest", "Executor", "ExecutorSettings", "Exporter",
    "Interrupted", "Metric", "NoSettings", "NodeResult", "PluginError", "RecipeError",
    "RemoteExecutor", "RemoteJob", "JobStatus", "Fetched", "WorkerKill",
    "Plan", "PlanNode", "Registry", "FactStore",
    "ResolveError", "ResultPart", "ResultsError", "RunError", "StepContext", "StepFailed",
    "StepOutput", "StepType", "Suite", "ConditionalDep",
    "UsageError", "hookimpl", "run", "run_request", "RunRequest", "plan", "explain", "list_recipes", "detect_facts",  # noqa: F822 - lazy
    "validate_document", "plan_plugins", "require_extra",  # noqa: F822 - lazy
    "Resources", "NO_RESOURCES", "node_resources", "plan_resources", "comparable",
    "comparable_across_sweeps",
    "is_secret_name", "TOKEN_PATTERNS",
    "get_sandbox", "Sandbox", "SandboxBackend", "SandboxSpec", "Limits", "SandboxUser", "SandboxResult", "Verdict",
    # what the in-tree plugins reached past the API for, before the layers issue (#27)
    "cache_dir", "data_dir", "write_lock", "fold", "check_spec", "pick_cpus", "BubblewrapSession",
    "session_unavailable", "Ending", "decide", "point_command", "run_sweep", "SweepRequest",
    "Meter", "register_template_function",
    # the run's telemetry (docs/telemetry.md): a step's metrics sink, the sampler's settings
    "MetricsSink", "NoMetrics", "TelemetrySettings",
    # recovery policies (docs/faults.md): what a cluster executor maps to its scheduler's retries
    "RetryPolicy", "job_policy", "scheduler_retries",  # noqa: F822 - lazy
    # the typed fault names: a failed attempt's class, an injectable kind, the one a cluster executor owns
    "FaultClass", "FaultKind", "KILL_WORKER",
    # a batch that resubmits its lost jobs itself (a Slurm job array's tasks)
    "LostJobs", "job_fault", "set_aside",
    # output that fits the terminal (#33): tables and the shared number format
    "Column", "Grid", "fit", "fit_text", "width_for", "fmt_number",
    # tar archives unpacked through tarfile's filters, also on a Python that lacks them
    "extract_all", "data_filter", "tar_filter", "FilterError",
    # launchers (cmx_register_launchers): how a run's ranks start on the nodes an executor placed
    "Launcher", "RankLayout", "NodeCommand",
    # the one ResNet-50 v1.5 of the MLPerf and training suites (torch imported when called)
    "resnet50",
]

_LAZY = {
    "run": "cmx_core.run.engine:run_tags", "run_request": "cmx_core.run.engine:run",
    "RunRequest": "cmx_core.run.request", "plan": "cmx_core.run.engine", "explain": "cmx_core.run.engine",
    "list_recipes": "cmx_core.run.engine", "detect_facts": "cmx_core.run.engine",
    "validate_document": "cmx_core.results.validate", "resnet50": "cmx_core.models.resnet",
    "plan_plugins": "cmx_core.run.engine",
    "RemoteExecutor": "cmx_core.run.remote", "RemoteJob": "cmx_core.run.remote", "JobStatus": "cmx_core.run.remote",
    "Fetched": "cmx_core.run.remote", "WorkerKill": "cmx_core.run.remote",
    "Plan": "cmx_core.plan.planner", "PlanNode": "cmx_core.plan.planner", "Registry": "cmx_core.plugins.registry",
    "FactStore": "cmx_core.facts.store",
    "get_sandbox": "cmx_core.plugins.loader",
    "require_extra": "cmx_core.plugins.extras",
    **dict.fromkeys(("Resources", "NO_RESOURCES", "node_resources", "plan_resources"), "cmx_core.recipes.resources"),
    "comparable": "cmx_core.results.comparable", "comparable_across_sweeps": "cmx_core.results.comparable",
    "is_secret_name": "cmx_core.results.secrets", "TOKEN_PATTERNS": "cmx_core.results.secrets",
    **dict.fromkeys(("Sandbox", "SandboxBackend", "SandboxSpec", "Limits", "SandboxUser", "SandboxResult", "Verdict",
                     "check_spec"), "cmx_core.sandbox"),
    "cache_dir": "cmx_core.paths", "data_dir": "cmx_core.paths",
    "write_lock": "cmx_core.run.engine",
    "fold": "cmx_core.run.remote", "pick_cpus": "cmx_core.sandbox.cpus",
    **dict.fromkeys(("BubblewrapSession", "session_unavailable"), "cmx_core.sandbox.session"),
    **dict.fromkeys(("Ending", "decide"), "cmx_core.sandbox.verdict"),
    **dict.fromkeys(("point_command", "run_sweep"), "cmx_core.sweep.runner"),
    "SweepRequest": "cmx_core.sweep.request",
    "Meter": "cmx_core.telemetry.energy",
    "register_template_function": "cmx_core.recipes.template",
    "TelemetrySettings": "cmx_core.telemetry.collector",
    "RetryPolicy": "cmx_core.providers.recovery",
    "FaultClass": "cmx_core.providers.recovery", "FaultKind": "cmx_core.providers.recovery",
    "KILL_WORKER": "cmx_core.faults.kinds.kill_worker",
    **dict.fromkeys(("job_policy", "scheduler_retries", "LostJobs", "job_fault", "set_aside"), "cmx_core.run.remote"),
    **dict.fromkeys(("Column", "Grid", "fit", "fit_text", "width_for"), "cmx_core.results.grid"),
    "fmt_number": "cmx_core.results.numbers",
    **dict.fromkeys(("extract_all", "data_filter", "tar_filter", "FilterError"), "cmx_core.sandbox.tarsafe"),
}


def __getattr__(name: str) -> Any:
    """Engine functions and the result validator, imported on first use."""
    if name in _LAZY:
        module, _, attribute = _LAZY[name].partition(":")  # "module:attribute" where the names differ
        return getattr(importlib.import_module(module), attribute or name)
    raise AttributeError(name)
