"""The typed Python API: everything the CLI does is a function here.

>>> from cmx_core import api
>>> result = api.run(tags=["detect", "os"])          # doctest: +SKIP
>>> result.document["status"]                              # doctest: +SKIP
'completed'
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmx_core import paths
from cmx_core.cache.store import Cache
from cmx_core.catalog.catalog import Catalog, load_catalog
from cmx_core.datautil import atomic_write, digest
from cmx_core.errors import CmxError, Interrupted, RecipeError, ResolveError, StepFailed, UsageError, did_you_mean
from cmx_core.facts.store import FactStore
from cmx_core.faults.registry import check_injections
from cmx_core.plan.conditional import ByStep, conditional_deps, of_node
from cmx_core.plan.planner import FactsOrigin, Plan, PlanNode, PlanQuery, StepTypes, build_plan
from cmx_core.plan.view import view
from cmx_core.plugins.events import registry_events
from cmx_core.plugins.extras import check_plan_extras
from cmx_core.plugins.loader import get_registry
from cmx_core.plugins.registry import ExecutionContext, ExecutionRequest, Executor, Registry, missing_provider_message
from cmx_core.providers.recovery import NO_RECOVERY, Recovery
from cmx_core.providers.types import ExecutorSettings, RunError
from cmx_core.recipes.model import Recipe, split_tags
from cmx_core.recipes.template import TemplateError
from cmx_core.resolve.decision import Decision
from cmx_core.resolve.resolver import CachedLookup, Resolution, Resolver
from cmx_core.results.document import build_document
from cmx_core.results.store import ResultStore
from cmx_core.run import checkpoints, inflight
from cmx_core.run.conditions import conditions_section, start_window
from cmx_core.run.execute import NodeFailed
from cmx_core.run.facts_check import check_facts_here, facts_file_ref
from cmx_core.run.inflight import INTERRUPTED
from cmx_core.run.lock import check_drift, check_drift_classes, lock_document, read_lock
from cmx_core.run.lock_records import Lock
from cmx_core.run.observe import check_settings, observed
from cmx_core.run.recording import Provenance, failed_outcome, record_run, run_record
from cmx_core.run.repo_sources import RepoUse, lock_pins, origins, session_repos
from cmx_core.run.request import DEFAULT_EXECUTOR, ExecutorChoice, RunRequest
from cmx_core.run.runids import new_run_id, run_dir_name
from cmx_core.run.settings import parse_settings
from cmx_core.run.stop_points import fault_point

if TYPE_CHECKING:
    from cmx_core.plan.view import PlanView
    from cmx_core.telemetry.collector import TelemetrySettings


class Session(NamedTuple):
    """What one command needs: plugins, the catalog, facts and the cache."""

    registry: Registry
    catalog: Catalog
    facts: FactStore
    cache: Cache
    recipes_dirs: tuple[Path, ...]
    facts_file: Path | None
    repos: tuple[RepoUse, ...] = ()
    """The added recipe repositories and the commit of each this session uses."""


def resolve_recipes_dirs(recipes_dirs: Sequence[str | Path]) -> tuple[Path, ...]:
    """``--recipes`` directories as absolute paths (``~`` expanded, symlinks resolved)."""
    return tuple(Path(d).expanduser().resolve() for d in recipes_dirs)


def open_session(recipes_dirs: Sequence[str | Path] = (), facts_file: str | Path | None = None,
                 repo_pins: Mapping[str, RepoUse] | None = None) -> Session:
    """Plugins, catalog, facts and cache for one command; ``repo_pins`` (a lock's recipe
    repositories by name) replaces the pinned commits of those repositories."""
    registry = get_registry()
    dirs = resolve_recipes_dirs(recipes_dirs)
    repos, repo_paths = session_repos(registry, repo_pins)
    catalog = load_catalog(dirs, plugin_paths=registry.recipe_paths, repo_paths=repo_paths,
                           origins=origins(repos, repo_paths))
    catalog.raise_ambiguous()
    if strict_mode():
        catalog.raise_errors()
    facts = FactStore.from_file(Path(facts_file), registry.detectors) if facts_file else FactStore(registry.detectors)
    return Session(registry, catalog, facts, Cache(), dirs, Path(facts_file) if facts_file else None, repos)


def strict_mode() -> bool:
    """``--strict`` (``CMX_STRICT``) or a CI environment (``CI`` set): broken recipe files
    are errors rather than warnings."""
    return any(os.environ.get(name, "") not in ("", "0", "false") for name in ("CMX_STRICT", "CI"))


def _tags(tags: str | Sequence[str]) -> tuple[str, ...]:
    """The query's tags; one given twice counts once, with a warning (CM accepts
    ``--tags=a,a`` too, so it is not an error)."""
    listed = split_tags(tags) if isinstance(tags, str) else [t.strip() for t in tags if t.strip()]
    unique = tuple(dict.fromkeys(listed))
    if len(unique) != len(listed):
        twice = sorted({t for t in listed if listed.count(t) > 1})
        print(f"cmx: warning: --tags lists {', '.join(repr(t) for t in twice)} more than once; once is enough",
              file=sys.stderr)
    return unique


def plan(tags: str | Sequence[str], inputs: Mapping[str, Any] | None = None, *,
         recipes_dirs: Sequence[str | Path] = (), facts_file: str | Path | None = None,
         executor: str | None = None, options: Mapping[str, Any] | None = None) -> Plan:
    """Resolve ``tags`` into a plan without running anything, and check it the way a run
    would: the executor that would run it (``executor``, or the default) is chosen, its
    settings (``options``) are parsed and its ``check_plan`` is called."""
    return plan_in(open_session(recipes_dirs, facts_file), tags, inputs, ExecutorChoice(executor, options or {}))


def plan_in(session: Session, tags: str | Sequence[str], inputs: Mapping[str, Any] | None = None,
            executor: ExecutorChoice = DEFAULT_EXECUTOR) -> Plan:
    """:func:`plan` in a session already open (``cmx sweep`` plans every point in one)."""
    the_plan = _resolve_plan(tags, inputs, session)
    _checked_executor(session, the_plan, executor)
    return the_plan


def plan_view(tags: str | Sequence[str], inputs: Mapping[str, Any] | None = None, *,
              recipes_dirs: Sequence[str | Path] = (), facts_file: str | Path | None = None,
              executor: str | None = None, options: Mapping[str, Any] | None = None) -> PlanView:
    """What ``cmx plan`` shows: the checked plan, each step's settings rendered as far as
    they can be before anything runs, and how the chosen executor would run it."""
    session = open_session(recipes_dirs, facts_file)
    the_plan = _resolve_plan(tags, inputs, session)
    chosen, settings = _checked_executor(session, the_plan, ExecutorChoice(executor, options or {}))
    context = ExecutionContext(the_plan, settings, session.facts, session.registry)
    execution = chosen.describe(context) if chosen.describe is not None else {}
    return view(the_plan, session.facts, chosen.name, execution, session.registry.steps)


def read_once(cache: Cache) -> CachedLookup:
    """The cache lookup a resolver is handed: the cache's valid entries are read on the first
    dep with ``cached_alternatives`` and kept for the rest of the plan (never for a plan without)."""
    valid = functools.cache(cache.valid_recipes)
    return lambda names: [name for name in names if name in valid()]


def _resolve_plan(tags: str | Sequence[str], inputs: Mapping[str, Any] | None, session: Session,
                  cached: CachedLookup | None = None) -> Plan:
    """The checked plan; ``cached`` answers for a dep's ``cached_alternatives`` (default: the
    session's cache)."""
    query = PlanQuery(_tags(tags), dict(inputs or {}), session.recipes_dirs)
    resolver = Resolver(session.catalog, session.facts, step_lookup=session.registry.step,
                        no_match_hint=_missing_plugin_hint, cached=cached or read_once(session.cache))
    try:
        resolution = resolver.resolve(query.tags, query.inputs)
    except CmxError as exc:
        if not session.catalog.errors:
            raise
        message = " ".join(str(exc).split("\n")[0].split())
        raise UsageError(f"{message}; a recipe file that failed to load may be the one meant: "
                         f"{session.catalog.errors_line()}") from None
    session.catalog.warn_errors()  # the plan did not need them: a warning each, once
    the_plan = _build(resolution, query, session)

    check_plan_extras(the_plan, session.registry)  # a missing extra is named now, not mid-run
    return the_plan


def _missing_plugin_hint(tags: tuple[str, ...]) -> str:
    """The plugin the registry says answers a query no installed recipe does (lazy import)."""
    from cmx_core.plugins.hints import missing_plugin_hint  # deferred: start-up: pulls packaging (14 modules)

    return missing_plugin_hint(tags)


def _checked_executor(session: Session, the_plan: Plan,
                      executor: ExecutorChoice) -> tuple[Executor, ExecutorSettings]:
    """The executor that would run the plan, its parsed settings, and its ``check_plan``
    passed: what ``cmx plan`` and ``cmx run`` both check before anything runs."""
    chosen = _executor(session, the_plan, executor.name)
    settings = executor_settings(chosen, executor.options)
    if chosen.check_plan is not None:
        chosen.check_plan(ExecutionContext(the_plan, settings, session.facts, session.registry))
    return chosen, settings


def _build(resolution: Resolution, query: PlanQuery, session: Session) -> Plan:
    """The plan of a resolution: cache keys and would-hit status per node."""
    versions = {name: step.version for name, step in session.registry.steps.items()}
    shadowed = {name: [i.path for i in lst] for name, lst in session.catalog.shadowed_listed.items()}
    measuring = frozenset(name for name, step in session.registry.steps.items() if step.measures)
    return build_plan(resolution, query, StepTypes(versions, measuring),
                      FactsOrigin(session.facts.source, session.facts_file), session.cache, shadowed)


# -- explain ------------------------------------------------------------------------------


@dataclass
class Explanation:
    """Why each candidate and variation was taken or rejected; why a node misses the cache."""

    decisions: list[Decision]
    plan: Plan | None
    error: str | None
    misses: dict[str, list[str]] = field(default_factory=dict)
    conditional: ByStep = field(default_factory=dict)
    """node id -> step id -> the deps that step runs itself, decided at run time."""

    def to_json(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "decisions": [
                {"query": list(d.query), "chain": list(d.chain), "node": d.node_id,
                 "candidates": [c._asdict() for c in d.candidates],
                 "variations": [{"name": n, "why": w} for n, w in d.variations],
                 "skipped": [{"what": n, "why": w} for n, w in d.skipped],
                 "chosen": [{"dep": n, "why": w} for n, w in d.chosen]}
                for d in self.decisions
            ],
            "cache": {n.id: {"status": n.cache_status, "reason": n.cache_reason,
                             "changed": self.misses.get(n.id, [])}
                      for n in (self.plan.nodes if self.plan else ())},
            "conditional_deps": {node: [d.to_json() for d in of_node(self.conditional, node)]
                                 for node in self.conditional},
        }


def explain(tags: str | Sequence[str], inputs: Mapping[str, Any] | None = None, *,
            recipes_dirs: Sequence[str | Path] = (), facts_file: str | Path | None = None) -> Explanation:
    """Resolve like :func:`plan`, but keep the reasoning, also when resolution fails."""
    session = open_session(recipes_dirs, facts_file)
    query = PlanQuery(_tags(tags), dict(inputs or {}), session.recipes_dirs)
    resolver = Resolver(session.catalog, session.facts, step_lookup=session.registry.step,
                        no_match_hint=_missing_plugin_hint, every_candidate=True, cached=read_once(session.cache))
    try:
        result = _build(resolver.resolve(query.tags, query.inputs), query, session)
    except CmxError as exc:
        return Explanation(resolver.decisions, None, str(exc))
    misses = {n.id: cache_miss_reasons(session.cache, n) for n in result.nodes if n.cache_status == "miss"}
    return Explanation(resolver.decisions, result, None, misses,
                       conditional_deps(result, session.registry.steps))


def cache_miss_reasons(cache: Cache, node: PlanNode) -> list[str]:
    """Which parts of the key differ from the newest entry of the same recipe."""
    previous = cache.previous_for(node.recipe.name)
    if previous is None:
        return ["no earlier cache entry of this recipe"]
    old_parts = previous.meta.get("key_parts", {})
    old_values = previous.meta.get("key_values", {})
    reasons = []
    for part, new in node.key_parts.items():
        if old_parts.get(part) == new:
            continue
        detail = _value_diff(old_values.get(part), node.key_values.get(part))
        reasons.append(f"{part} changed" + (f": {detail}" if detail else ""))
    return reasons or [f"entry {previous.key[:12]} is no longer valid"]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _value_diff(old: Any, new: Any) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        changed = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys
                   if _canonical(old.get(k)) != _canonical(new.get(k))]
        return "; ".join(changed[:5])
    return "" if old is None else f"{str(old)[:40]!r} -> {str(new)[:40]!r}"


# -- run ----------------------------------------------------------------------------------


class RunResult(NamedTuple):
    run_id: str
    run_dir: Path
    result_path: Path
    document: dict[str, Any]
    plan: Plan
    session: Session | None = None
    """What the run used (plugins, catalog, facts), for callers that inspect it further."""

    @property
    def status(self) -> str:
        return str(self.document.get("status"))


def run(request: RunRequest, on_plan: Callable[[Plan], None] | None = None) -> RunResult:
    """Resolve, run and record ``request`` (:class:`~cmx_core.run.request.RunRequest` says
    what each field means). Raises StepFailed (after writing the error result) when a step
    fails, CmxError for bad input; returns the written, indexed result otherwise. With a
    lock, the lockfile's query is replayed and any drift is refused. An executor of None
    means ``docker`` when the recipe (or a selected variation) declares a container, else
    ``local``; its options are checked against its settings class. ``on_plan`` is handed
    the checked plan before anything runs (the CLI prints it on a terminal)."""
    observe = check_settings(request.telemetry)
    recovery = request.recovery
    locked, recipes_dirs, facts_file = _locked(request)
    session = open_session(recipes_dirs, facts_file, lock_pins(locked))
    if locked is not None and request.lock:
        the_plan = replay(locked, Path(request.lock), session, request.allow_drift)
    elif request.planned is not None:
        the_plan = _given(request.planned, request.tags, request.inputs)
    else:
        the_plan = _resolve_plan(request.tags, request.inputs, session)
    chosen, settings = _checked_executor(session, the_plan, request.choice)
    check_facts_here(session.facts, FactStore(session.registry.detectors), chosen.name, chosen.runs_here)
    check_injections(recovery.injections, chosen.name, chosen.injects)
    if on_plan is not None:
        on_plan(the_plan)

    ResultStore(paths.results_db()).check()  # a corrupt store fails now, not after the benchmark
    if request.use_cache:
        session.cache.prepare()  # a staging dir that is a file fails now, before the run dir
    run_id = new_run_id()
    run_dir = _run_dir_path(run_id, the_plan.root.recipe.name, request.output)
    lock = lock_json(the_plan, session.registry, session.repos)
    execution = ExecutionRequest(
        ExecutionContext(the_plan, settings, session.facts, session.registry, observe, recovery), run_dir=run_dir,
        lock_path=run_dir / "lock.json", run_id=run_id, jobs=request.jobs, use_cache=request.use_cache,
        refresh=request.refresh,
    )

    inflight.reap()  # runs a killed cmx left behind are recorded as interrupted
    session.cache.clean_staging()
    provenance = run_provenance(digest(lock), session, request.sweep, recovery)
    # The marker comes before anything of the run directory: a kill at any point after this
    # leaves a directory the next start (or `cmx results reindex`) records as interrupted.
    inflight.mark(run_id, run_dir, interrupted_document(execution, provenance))
    try:
        fault_point("marked")
        _make_run_dir(run_dir, request.output)
        fault_point("run-dir")
        _write_json(run_dir / "plan.json", the_plan.to_json())
        fault_point("plan-written")
        _write_json(run_dir / "lock.json", lock)
        fault_point("lock-written")
        result_path, document, exit_code = _execute(chosen, execution, provenance, session, observe)
    finally:
        inflight.clear(run_id)
    if document.get("status") == "error":
        raise _run_failure(document, result_path, exit_code)
    return RunResult(run_id, run_dir, result_path, document, the_plan, session)


def _locked(request: RunRequest) -> tuple[Lock | None, Sequence[str | Path], str | Path | None]:
    """The lock a run replays (None without ``--lock``), and the recipe directories and facts
    file it runs with: those given, else the lock's (its facts file not for ``remote`` drift)."""
    if not request.lock:
        if request.allow_drift:
            raise UsageError("--allow-drift applies to --lock FILE only")
        return None, request.recipes_dirs, request.facts_file
    check_drift_classes(request.allow_drift)
    locked = read_lock(Path(request.lock))
    recipes_dirs = request.recipes_dirs or locked.query.recipes_dirs
    facts_file = request.facts_file
    if "remote" not in request.allow_drift:
        facts_file = facts_file or locked.query.facts_file
    return locked, recipes_dirs, facts_file


def run_tags(tags: str | Sequence[str], inputs: Mapping[str, Any] | None = None, *,
             on_plan: Callable[[Plan], None] | None = None, **fields: Any) -> RunResult:
    """``api.run``: :func:`run` with the request's fields as keyword arguments
    (``api.run("demo,sort", {"size": 5}, executor="local")``); an unknown name is a TypeError."""
    return run(RunRequest(tags, inputs, **fields), on_plan)


def _given(planned: Plan, tags: str | Sequence[str], inputs: Mapping[str, Any] | None) -> Plan:
    """A plan made elsewhere, if it is the plan of these tags and inputs (else UsageError)."""
    asked = PlanQuery(_tags(tags), {k: str(v) for k, v in (inputs or {}).items()})
    made = PlanQuery(planned.query.tags, {k: str(v) for k, v in planned.query.inputs.items()})
    if asked != made:
        raise UsageError(f"the plan handed to this run is for --tags={','.join(made.tags)} {dict(made.inputs)}, "
                         f"not --tags={','.join(asked.tags)} {dict(asked.inputs)}")
    return planned


def executor_settings(chosen: Executor, options: Mapping[str, Any]) -> ExecutorSettings:
    """The executor's settings from ``--executor-opt`` values (checked, converted)."""
    return parse_settings(chosen.name, chosen.settings, options)


def run_provenance(lock_digest: str, session: Session, sweep: Mapping[str, Any] | None,
                   recovery: Recovery = NO_RECOVERY) -> Provenance:
    """The provenance of a run: the lock's digest, the loaded plugins, the sweep point (if
    any), the recipe repositories, the facts file (if any) and the faults it injects."""
    return Provenance(lock_digest, [(p["name"], p["distribution"], p["version"])
                                    for p in _plugins(session.registry)], sweep,
                      repos=tuple(r.to_json() for r in session.repos),
                      facts_file=facts_file_ref(session.facts_file) if session.facts_file else None,
                      injections=[i.to_json() for i in recovery.injections])


def interrupted_document(request: ExecutionRequest, provenance: Provenance) -> dict[str, Any]:
    """The error result the run gets if its cmx is killed before it records one."""
    error = RunError(INTERRUPTED.format(pid=os.getpid()), exit_code=130)
    return build_document(run_record(request, failed_outcome(time.time(), error), provenance, {}))


def _execute(chosen: Executor, request: ExecutionRequest, provenance: Provenance,
             session: Session, observe: TelemetrySettings | None = None) -> tuple[Path, dict[str, Any], int]:
    """Run the executor (sampled: :mod:`cmx_core.run.observe`) and record whatever happened:
    its outcome, or its own failure. Returns the result's path and document and the exit
    code of a failure."""
    started = time.time()
    window = start_window(chosen.name)
    with observed(request, chosen.name, observe or check_settings(None)) as observation:
        try:
            outcome = observation.run(lambda: chosen.run(request))
        except Interrupted:
            raise
        except CmxError as exc:  # the executor itself failed: still an error result
            outcome = failed_outcome(started, RunError(f"{chosen.name} executor: {exc}",
                                                       exit_code=executor_exit_code(exc)))
    outcome = observation.fold(outcome)
    conditions = conditions_section(window, outcome)
    path, document = record_run(request, outcome, provenance, registry_events(session.registry), conditions)
    return path, document, outcome.error.exit_code if outcome.error else 1


BAD_INPUT: tuple[type[CmxError], ...] = (UsageError, RecipeError, ResolveError, TemplateError)
"""What an executor raises when it refuses its input rather than failing on its own."""


def executor_exit_code(exc: CmxError) -> int:
    """The exit code of a run whose executor raised ``exc``: 2 when it refused its input (a
    UsageError: no such partition, a bad setting; a recipe, template or dependency it could
    not use), else 1, a failed run as the README says (an image that does not build, a job
    that never starts)."""
    return 2 if isinstance(exc, BAD_INPUT) else 1


def _run_failure(document: Mapping[str, Any], result_path: Path, exit_code: int = 1) -> CmxError:
    """The error for a recorded run whose status is ``error``: a failed step (exit 1, or 2
    when it refused its input), or a suite that reported errors while still measuring."""
    error = document.get("error")
    if error:
        failed: CmxError = NodeFailed(error.get("node") or "?", error.get("step") or "?",
                                      error.get("message", "failed"))
        if error.get("node") is None:
            failed = StepFailed(error.get("message", "failed"))
        failed.exit_code = exit_code
    else:
        reasons = document.get("invalid_reasons") or ["no reason given"]
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        task = document.get("benchmark", {}).get("task", "the run")
        failed = StepFailed(f"{task} reported errors: {reasons[0]}{more}")
    failed.result_path = result_path  # type: ignore[attr-defined]
    return failed


def _executor(session: Session, the_plan: Plan, name: str | None) -> Executor:
    """The executor to use; a recipe declaring a container defaults to ``docker``."""
    if name is None:
        name = "docker" if the_plan.container else "local"
        if name == "docker" and name not in session.registry.executors:
            raise UsageError(
                f"recipe {the_plan.root.recipe.name} runs in container '{the_plan.container}': "
                f"{missing_provider_message('executor', 'docker')} (or pass --executor local)")
    chosen = session.registry.executors.get(name)
    if chosen is None:
        raise UsageError(missing_provider_message("executor", name))
    return chosen


def replay(locked: Lock, lock_path: Path, session: Session,
           allow_drift: Sequence[str] = ()) -> Plan:
    """Resolve a lockfile's (already read) query; a ResolveError if anything differs
    (beyond the ``allow_drift`` classes). A dep with ``cached_alternatives`` takes the recipe
    the lock holds, not what the cache holds today: the lock says what ran."""
    locked_recipes = frozenset(node.recipe for node in locked.nodes if node.recipe)
    the_plan = _resolve_plan(locked.query.tags, locked.query.inputs, session,
                             cached=lambda names: [name for name in names if name in locked_recipes])
    check_drift(locked, lock_document(the_plan, _plugins(session.registry, the_plan), _repos(session)), lock_path,
                allow=allow_drift)
    return the_plan


def _repos(session: Session) -> list[dict[str, str]]:
    return [r.to_json() for r in session.repos]


def _run_dir_path(run_id: str, recipe: str, output: str | Path | None) -> Path:
    """Where the run directory goes (``--output`` checked to be new or empty); not made yet."""
    if output is not None:
        run_dir = Path(output).expanduser().resolve()
        if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
            raise UsageError(f"--output {run_dir}: exists and is not an empty directory; choose a new one")
        return run_dir
    return paths.runs_dir() / run_dir_name(recipe, run_id)


def _make_run_dir(run_dir: Path, output: str | Path | None) -> Path:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)  # missing parents of --output are created
    except OSError as exc:
        what = f"--output {run_dir}" if output is not None else f"the run directory {run_dir}"
        raise UsageError(f"{what}: cannot create it: {exc.strerror} ({exc.filename})") from None
    checkpoints.seed(run_dir)  # a job-level retry's far run: its earlier attempt's checkpoints
    return run_dir


def write_lock(run_dir: Path, the_plan: Plan, registry: Registry, repos: Sequence[RepoUse] = ()) -> str:
    """The lockfile of the resolved run (with the recipe repositories' commits); returns its digest."""
    lock = lock_json(the_plan, registry, repos)
    _write_json(run_dir / "lock.json", lock)
    return digest(lock)


def lock_json(the_plan: Plan, registry: Registry, repos: Sequence[RepoUse] = ()) -> dict[str, Any]:
    """The lockfile's document (what :func:`write_lock` writes)."""
    return lock_document(the_plan, _plugins(registry, the_plan), [r.to_json() for r in repos]).to_json()


def _plugins(registry: Registry, the_plan: Plan | None = None) -> list[dict[str, Any]]:
    """The loaded plugins; with a plan, each says whether the plan uses it (``used``)."""
    used = plan_plugins(the_plan, registry) if the_plan is not None else set()
    listed: list[dict[str, Any]] = []
    for p in registry.plugins.values():
        if not p.error:
            entry: dict[str, Any] = {"name": p.name, "distribution": p.distribution, "version": p.version}
            if the_plan is not None:
                entry["used"] = p.name in used
            listed.append(entry)
    return listed


def plan_plugins(the_plan: Plan, registry: Registry) -> set[str]:
    """The plugins whose recipes, step types or detectors the plan uses."""
    used = {"cmx-core"}
    for node in the_plan.nodes:
        source = str(node.recipe.source or "")
        if source.startswith("plugin:"):
            used.add(source.split(":", 1)[1])
        for step in node.steps:
            provider = registry.steps.get(step.uses)
            if provider is not None:
                used.add(provider.plugin)
        for fact in node.facts_used:
            detector = registry.detectors.get(str(fact).split(".")[0])
            if detector is not None:
                used.add(detector.plugin)
    return used


def _write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=True, default=str))


# -- catalog and facts --------------------------------------------------------------------


def session_catalog(recipes_dirs: Sequence[str | Path] = ()) -> Catalog:
    """The catalog of ``--recipes``, the environment, the recipe repositories, plugins and core."""
    registry = get_registry()
    repos, repo_paths = session_repos(registry)
    return load_catalog(tuple(Path(d) for d in recipes_dirs), plugin_paths=registry.recipe_paths,
                        repo_paths=repo_paths, origins=origins(repos, repo_paths))


def list_recipes(tags: str | Sequence[str] = (), *, recipes_dirs: Sequence[str | Path] = (),
                 errors: list[str] | None = None) -> list[Recipe]:
    """Effective recipes having every given tag, sorted by name; the load errors of broken
    recipe files are appended to ``errors`` when given, else raised."""
    catalog = session_catalog(recipes_dirs)
    if errors is None:
        catalog.raise_errors()
    else:
        errors.extend(catalog.errors.values())
    wanted = set(_tags(tags))
    return sorted((r for r in catalog.recipes.values() if wanted <= set(r.tags)), key=lambda r: r.name)


def show_recipe(name: str, *, recipes_dirs: Sequence[str | Path] = ()) -> Recipe:
    catalog = session_catalog(recipes_dirs)
    catalog.raise_ambiguous()
    recipe = catalog.get(name)
    if recipe is None:
        first = next(iter(catalog.errors.values()), "")
        broken = f"; {len(catalog.errors)} recipe file(s) failed to load, first: {first}" \
            if catalog.errors else ""

        hint = did_you_mean(name, catalog.listed, n=1)
        raise UsageError(f"no recipe named '{name}'{hint} (see 'cmx list recipes'){broken}")
    return recipe


def detect_facts(names: Sequence[str] | None = None, *, facts_file: str | Path | None = None) -> dict[str, Any]:
    """Run detectors (or read a facts file) and return ``{name: value}``."""
    registry = get_registry()
    store = FactStore.from_file(Path(facts_file)) if facts_file else FactStore(registry.detectors)
    return {name: store.try_get(name) for name in (names or store.available())}
