"""The one table of :mod:`cmx_core.api`'s names, grouped by what a plugin author needs.

Each group maps a module to the names the API takes from it; ``"attr as name"`` exports a
module attribute under another name. :mod:`cmx_core.api` builds its lazy lookup and
``__all__`` from this table at import, and its ``if TYPE_CHECKING:`` block (what type
checkers read) is written from it by ``python scripts/api_table.py --write``;
``tests/test_api_table.py`` fails when the two differ. Adding a name is one entry here.
Standard library only and nothing imported at module level: every plugin load reads it.

Helpers that are not the plugin contract live in submodules of their own, each a plain list
of imports: :mod:`cmx_core.api.display` (tables and numbers that fit the terminal),
:mod:`cmx_core.api.archives` (tar archives unpacked through tarfile's filters),
:mod:`cmx_core.api.files` (a file written whole or not at all) and
:mod:`cmx_core.api.sandboxing` (the pieces a sandbox backend or a judge reuses).
"""

from __future__ import annotations

GROUPS: dict[str, dict[str, tuple[str, ...]]] = {
    "errors: what a plugin raises and catches (docs/plugins.md)": {
        "cmx_core.errors": ("CmxError", "UsageError", "RecipeError", "ResolveError", "PluginError", "CacheError",
                            "ResultsError", "StepFailed", "Interrupted"),
    },
    "provider contract: what a plugin registers, and what its providers are handed": {
        "cmx_core.plugins.hookspecs": ("hookimpl",),
        "cmx_core.providers.types": ("StepType", "StepContext", "Detector", "Command", "Exporter", "Suite",
                                     "ConditionalDep", "CachedMeasurement", "MetricsSink", "NoMetrics",
                                     "Launcher", "RankLayout", "NodeCommand"),
        "cmx_core.providers.values": ("StepOutput", "Capabilities"),
        "cmx_core.plugins.registry": ("Registry",),
        "cmx_core.plan.planner": ("Plan", "PlanNode"),
        "cmx_core.facts.store": ("FactStore",),
        "cmx_core.recipes.resources": ("Resources", "NO_RESOURCES", "node_resources", "plan_resources"),
        "cmx_core.recipes.template": ("register_template_function",),
        "cmx_core.plugins.extras": ("require_extra",),
        "cmx_core.plugins.local_source": ("project_name",),
        "cmx_core.paths": ("cache_dir", "data_dir"),
        "cmx_core.cache.store": ("cached_recipes",),
        "cmx_core.run.processes": ("run_step_process",),
    },
    "executor contract: running a plan somewhere, and recovering from lost jobs (docs/faults.md)": {
        "cmx_core.plugins.registry": ("Executor", "ExecutionContext", "ExecutionRequest"),
        "cmx_core.providers.types": ("ExecutorSettings", "NoSettings", "ExecutionOutcome", "NodeResult", "RunError"),
        "cmx_core.run.remote": ("RemoteExecutor", "RemoteJob", "JobStatus", "Fetched", "WorkerKill", "fold",
                                "LostJobs", "job_fault", "set_aside", "job_policy", "scheduler_retries"),
        "cmx_core.run.engine": ("write_lock", "plan_plugins"),
        "cmx_core.providers.recovery": ("RetryPolicy", "FaultClass", "FaultKind"),
        "cmx_core.faults.kinds.kill_worker": ("KILL_WORKER",),
        "cmx_core.telemetry.collector": ("TelemetrySettings",),
    },
    "results: a suite's section of the result document, and checking documents": {
        "cmx_core.providers.values": ("ResultPart", "Metric", "Artifact"),
        "cmx_core.results.validate": ("validate_document",),
        "cmx_core.results.comparable": ("comparable", "comparable_across_sweeps"),
        "cmx_core.results.secrets": ("is_secret_name", "TOKEN_PATTERNS"),
        "cmx_core.telemetry.energy": ("Meter",),
    },
    "the sandbox for untrusted code (docs/sandbox.md)": {
        "cmx_core.plugins.loader": ("get_sandbox",),
        "cmx_core.sandbox": ("Sandbox", "SandboxBackend", "SandboxSpec", "Limits", "SandboxUser", "SandboxResult",
                             "Verdict"),
    },
    "engine entry points, for scripts and suites that drive cmx": {
        "cmx_core.run.engine": ("run_tags as run", "run as run_request", "plan", "explain", "list_recipes",
                                "detect_facts"),
        "cmx_core.run.request": ("RunRequest",),
        "cmx_core.sweep.request": ("SweepRequest",),
        "cmx_core.sweep.runner": ("run_sweep", "point_command"),
    },
    "models more than one suite shares (torch imported when one is built)": {
        "cmx_core.models.resnet": ("resnet50",),
    },
}


def entries() -> list[tuple[str, str, str]]:
    """(module, attribute, exported name) for every name, in table order."""
    found = []
    for modules in GROUPS.values():
        for module, names in modules.items():
            for entry in names:
                attribute, _, name = entry.partition(" as ")
                found.append((module, attribute, name or attribute))
    return found
