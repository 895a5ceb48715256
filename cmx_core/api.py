"""cmx-core's public API for plugins and scripts. Plugins import only from here.

Providers and values: :class:`StepType`, :class:`Detector`, :class:`Executor`,
:class:`Command`, :class:`Exporter`, :class:`Suite`, :class:`Capabilities`,
:class:`StepContext`, :class:`StepOutput`, :class:`ResultPart`, :class:`Metric`,
:class:`Artifact`. The executor contract: :class:`ExecutionRequest`,
:class:`ExecutionOutcome`, :class:`NodeResult`, :class:`RunError`,
:class:`ExecutorSettings`, and (imported lazily) :class:`RemoteExecutor` with
:class:`RemoteJob` and :class:`JobStatus`. Errors: :class:`CmxError` and its
subclasses. Markers: :data:`hookimpl`. Engine entry points (imported lazily):
``run``, ``plan``, ``explain``, ``list_recipes``, ``detect_facts``; the types a provider
is handed (``Plan``, ``PlanNode``, ``Registry``, ``FactStore``); ``plan_plugins(plan,
registry)``, the plugins a plan uses; the result validator
``validate_document(document, source, suites)`` for tools that read or check result documents.
The sandbox for untrusted code (imported lazily; ``docs/sandbox.md``): ``get_sandbox(name)``,
:class:`Sandbox`, :class:`SandboxBackend` (what ``cmx_register_sandboxes`` registers),
:class:`SandboxSpec`, :class:`Limits`, :class:`SandboxUser`, :class:`SandboxResult`,
:class:`Verdict`.
"""

from __future__ import annotations

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
from cmx_core.hookspecs import hookimpl
from cmx_core.providers import (
    Artifact,
    CachedMeasurement,
    Capabilities,
    Command,
    Detector,
    ExecutionOutcome,
    ExecutionRequest,
    Executor,
    ExecutorSettings,
    Exporter,
    Metric,
    NodeResult,
    NoSettings,
    ResultPart,
    RunError,
    StepContext,
    StepOutput,
    StepType,
    Suite,
)

if TYPE_CHECKING:  # the lazy names, for type checkers
    from cmx_core.engine import plan_plugins
    from cmx_core.facts import FactStore
    from cmx_core.planner import Plan, PlanNode
    from cmx_core.plugin_extras import require_extra
    from cmx_core.plugins import Registry, get_sandbox
    from cmx_core.remote import Fetched, JobStatus, RemoteExecutor, RemoteJob
    from cmx_core.resources import NO_RESOURCES, Resources, node_resources, plan_resources
    from cmx_core.result_compare import comparable, comparable_across_sweeps
    from cmx_core.sandbox import Limits, Sandbox, SandboxBackend, SandboxResult, SandboxSpec, SandboxUser, Verdict
    from cmx_core.secrets import TOKEN_PATTERNS, is_secret_name

__all__ = [
    "Artifact", "CacheError", "CachedMeasurement", "Capabilities", "CmxError", "Command", "Detector",
    "ExecutionOutcome", "ExecutionRequest", "Executor", "ExecutorSettings", "Exporter", "Interrupted",
    "Metric", "NoSettings", "NodeResult", "PluginError", "RecipeError",
    "RemoteExecutor", "RemoteJob", "JobStatus", "Fetched",
    "Plan", "PlanNode", "Registry", "FactStore",
    "ResolveError", "ResultPart", "ResultsError", "RunError", "StepContext", "StepFailed",
    "StepOutput", "StepType", "Suite",
    "UsageError", "hookimpl", "run", "plan", "explain", "list_recipes", "detect_facts",  # noqa: F822 - lazy
    "validate_document", "plan_plugins", "require_extra",  # noqa: F822 - lazy
    "Resources", "NO_RESOURCES", "node_resources", "plan_resources", "comparable",
    "comparable_across_sweeps",
    "is_secret_name", "TOKEN_PATTERNS",
    "get_sandbox", "Sandbox", "SandboxBackend", "SandboxSpec", "Limits", "SandboxUser", "SandboxResult", "Verdict",
]

_LAZY = {
    "run": "cmx_core.engine", "plan": "cmx_core.engine", "explain": "cmx_core.engine",
    "list_recipes": "cmx_core.engine", "detect_facts": "cmx_core.engine",
    "validate_document": "cmx_core.results.validate",
    "plan_plugins": "cmx_core.engine",
    "RemoteExecutor": "cmx_core.remote", "RemoteJob": "cmx_core.remote", "JobStatus": "cmx_core.remote",
    "Fetched": "cmx_core.remote",
    "Plan": "cmx_core.planner", "PlanNode": "cmx_core.planner", "Registry": "cmx_core.plugins",
    "FactStore": "cmx_core.facts",
    "get_sandbox": "cmx_core.plugins",
    "require_extra": "cmx_core.plugin_extras",
    **dict.fromkeys(("Resources", "NO_RESOURCES", "node_resources", "plan_resources"), "cmx_core.resources"),
    "comparable": "cmx_core.result_compare", "comparable_across_sweeps": "cmx_core.result_compare",
    "is_secret_name": "cmx_core.secrets", "TOKEN_PATTERNS": "cmx_core.secrets",
    **dict.fromkeys(("Sandbox", "SandboxBackend", "SandboxSpec", "Limits", "SandboxUser", "SandboxResult", "Verdict"),
                    "cmx_core.sandbox"),
}


def __getattr__(name: str) -> Any:
    """Engine functions and the result validator, imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
