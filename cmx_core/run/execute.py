"""The local executor: runs a plan's nodes in topological order, independent nodes in
parallel with ``-j N``, and returns a typed :class:`~cmx_core.providers.types.ExecutionOutcome`
(the engine alone builds and writes the result document).

Each step gets an immutable snapshot (read-only mappings, tuples) of its parameters, the
node's inputs and its deps' declared outputs; only the recipe's declared outputs leave a
node. Cached nodes run in a staging directory that becomes the cache entry only when every
step succeeded. A measuring node (a step type with ``measures=True``) is served from the
cache only when its recipe says ``cache: {measurements: true}``; its entry then keeps the
whole result part (see :mod:`cmx_core.run.measured`).

Nothing here redirects the process-wide ``sys.stdout``: steps write to their own log files
(``StepContext.log_dir``) and child processes get their own descriptors.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core import __version__, reads
from cmx_core.cache.store import META, Cache, CacheEntry, Staging, rebase
from cmx_core.datautil import digest, freeze, thaw
from cmx_core.errors import CmxError, Interrupted, ProcessEnd, StepFailed
from cmx_core.facts.store import FactStore
from cmx_core.faults.armed import armed
from cmx_core.faults.causes import classify
from cmx_core.faults.classify import fault_class
from cmx_core.plan.facts_view import FactsView, groups_of
from cmx_core.plan.planner import Plan, PlanNode
from cmx_core.plugins.events import EventSink
from cmx_core.plugins.extras import missing_module_hint
from cmx_core.plugins.registry import ExecutionRequest
from cmx_core.providers.attempts import Attempt
from cmx_core.providers.recovery import NO_RECOVERY, Recovery
from cmx_core.providers.refs import reference
from cmx_core.providers.types import ExecutionOutcome, NodeResult, RunError, StepContext, StepType
from cmx_core.providers.values import Artifact, ResultPart, StepOutput
from cmx_core.recipes.model import StepSpec
from cmx_core.recipes.template import render_value
from cmx_core.run import checkpoints
from cmx_core.run.attempts import AttemptLog, backoff, policy_for, work_lost
from cmx_core.run.checkpoints import checkpoint_dir
from cmx_core.run.measured import measurement_meta, served, stage_artifacts
from cmx_core.run.processes import kill_running
from cmx_core.telemetry.collector import step_metrics
from cmx_core.telemetry.live import BOARD

if TYPE_CHECKING:
    from concurrent.futures import Future

    from cmx_core.plugins.registry import Registry


class NodeFailed(StepFailed):
    """A step of a node failed; names the node and the step."""

    def __init__(self, node_id: str, step_id: str, message: str, *, wall_s: float = 0.0,
                 cache_key: str = "", exit_code: int = 1) -> None:
        self.exit_code = exit_code  # 2 when the step refused its input (a CmxError), else 1
        self.node_id = node_id
        self.step_id = step_id
        self.reason = message
        self.wall_s = wall_s
        self.cache_key = cache_key
        self.cause: str | None = None
        self.evidence: tuple[str, ...] = ()
        self.signal: str | None = None
        self.rank: int | None = None
        super().__init__(f"{node_id} / step {step_id}: {message}")

    def classified(self, log_dir: Path, ended: ProcessEnd | None) -> NodeFailed:
        """With the cause its own evidence shows: how its process ended, its logs
        (:mod:`cmx_core.faults.causes`)."""
        self.ended = ended
        found = classify(self.reason, sorted(log_dir.glob("*.txt")), ended)
        if found is not None:
            self.cause, self.evidence, self.signal, self.rank = found.cause, found.evidence, found.signal, found.rank
        return self


@dataclass(frozen=True)
class RunSettings:
    """How the nodes run: what the executor was asked besides the plan."""

    run_dir: Path
    run_id: str
    use_cache: bool = True
    refresh: bool = False
    recovery: Recovery = NO_RECOVERY
    jobs: int = 1
    """How many nodes run at once (``-j``)."""


@dataclass(frozen=True)
class StepScope:
    """What the steps of one node see: its work directory, its deps' outputs, the outputs of
    its steps that ran before (filled in as they end) and the facts."""

    work_dir: Path
    deps: Mapping[str, Any]
    step_outputs: Mapping[str, Mapping[str, Any]]
    facts: FactsView


@dataclass(frozen=True)
class Try:
    """One attempt of a step: its number (1 first), its checkpoint directory (None: the step
    keeps none) and its log directory."""

    number: int
    checkpoint: Path | None
    log_dir: Path


@dataclass
class _Progress:
    results: dict[str, NodeResult] = field(default_factory=dict)
    error: RunError | None = None


def run_local(request: ExecutionRequest, events: EventSink) -> ExecutionOutcome:
    """The ``local`` executor: run the plan here, in this process."""
    context = request.context
    settings = RunSettings(request.run_dir, request.run_id, request.use_cache, request.refresh, context.recovery,
                           request.jobs)
    return execute_plan(context.plan, context.facts, context.registry, Cache(), events, settings)


def execute_plan(plan: Plan, facts: FactStore, registry: Registry, cache: Cache, events: EventSink,
                 settings: RunSettings) -> ExecutionOutcome:
    """Run every node (``settings.jobs`` at once); a failure stops scheduling and is recorded in ``error``."""
    jobs = settings.jobs
    runner = NodeRunner(plan, facts, registry, cache, events, settings)
    progress = _Progress()
    started = time.time()
    try:
        if jobs <= 1:
            for node in plan.nodes:
                progress.results[node.id] = runner.run(node, progress.results)
        else:
            _run_parallel(plan, runner, progress.results, jobs)
    except NodeFailed as exc:
        progress.error = RunError(exc.reason, exc.node_id, exc.step_id, exit_code=exc.exit_code,
                                  cause=exc.cause, evidence=exc.evidence, signal=exc.signal, rank=exc.rank)
        progress.results[exc.node_id] = NodeResult(exc.node_id, _recipe_of(plan, exc.node_id), "failed",
                                                   exc.wall_s, exc.cache_key)
    except KeyboardInterrupt:

        kill_running()
        raise Interrupted("interrupted; no partial result or cache entry was kept") from None
    ordered = tuple(progress.results[n.id] for n in plan.nodes if n.id in progress.results)
    root = progress.results.get(plan.root.id)
    return ExecutionOutcome(nodes=ordered, root_outputs=root.outputs if root and root.status != "failed" else {},
                            started=started, finished=time.time(), error=progress.error,
                            attempts=runner.attempts.all())


def _recipe_of(plan: Plan, node_id: str) -> str:
    return next((n.recipe.name for n in plan.nodes if n.id == node_id), "?")


def _run_parallel(plan: Plan, runner: NodeRunner, done: dict[str, NodeResult], jobs: int) -> None:
    pending = {n.id: n for n in plan.nodes}
    running: dict[Future[NodeResult], str] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="cmx-node") as pool:
        try:
            while pending or running:
                for node_id, node in list(pending.items()):
                    if len(running) < jobs and all(d in done for d in node.deps.values()):
                        running[pool.submit(runner.run, node, dict(done))] = node_id
                        del pending[node_id]
                finished, _ = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in finished:
                    node_id = running.pop(future)
                    done[node_id] = future.result()  # re-raises NodeFailed
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)

            kill_running()
            raise


class NodeRunner:
    """Runs one node: cache lookup, steps in order, declared outputs, cache commit."""

    def __init__(self, plan: Plan, facts: FactStore, registry: Registry, cache: Cache,
                 events: EventSink, settings: RunSettings) -> None:
        self.plan = plan
        self.facts = facts
        self.registry = registry
        self.cache = cache
        self.events = events
        self.settings = settings
        self.run_dir = settings.run_dir
        self.attempts = AttemptLog()

    def run(self, node: PlanNode, done: Mapping[str, NodeResult]) -> NodeResult:
        start = time.perf_counter()
        deps = {alias: done[dep].outputs for alias, dep in node.deps.items()}
        key = self._effective_key(node, deps)
        if not self._uses_cache(node):
            return self._execute(node, deps, key, start, use_entry=False)
        hit = None if self.settings.refresh else self._hit(node, key, start)
        if hit is not None:
            return hit
        with self.cache.lock(key):  # another process may have computed it meanwhile
            hit = None if self.settings.refresh else self._hit(node, key, start)
            return hit or self._execute(node, deps, key, start, use_entry=True)

    def _uses_cache(self, node: PlanNode) -> bool:
        """``node.cacheable`` already says no for a measuring node whose recipe did not ask
        for cached measurements (see :attr:`cmx_core.plan.planner.PlanNode.cacheable`)."""
        return node.cacheable and self.settings.use_cache

    def _hit(self, node: PlanNode, key: str, start: float) -> NodeResult | None:
        entry, _ = self.cache.lookup(key, node.recipe.cache.expires_s)
        if entry is None or entry_invalid(entry, node, self.facts, self.registry) is not None:
            return None
        measurement = served(entry.meta, entry.path, key)
        if measurement is None and node.measures:
            return None  # an entry without its measurement cannot stand in for one
        self.events("cmx_node_started", node_id=node.id, recipe=node.recipe.name, cached=True)
        outputs = freeze(entry.outputs)
        wall = time.perf_counter() - start
        self.events("cmx_node_finished", node_id=node.id, recipe=node.recipe.name,
                    outputs=outputs, wall_s=wall, cached=True)
        if measurement is None:
            return NodeResult(node.id, node.recipe.name, "cached", wall, key, outputs)
        return NodeResult(node.id, node.recipe.name, "cached", wall, key, outputs, measurement.parts,
                          measurement.artifacts, measurement.provenance)

    def _execute(self, node: PlanNode, deps: Mapping[str, Any], key: str, start: float,
                 use_entry: bool) -> NodeResult:
        self.events("cmx_node_started", node_id=node.id, recipe=node.recipe.name, cached=False)
        try:
            result = self._run_steps(node, deps, key, start, use_entry)
        except NodeFailed as exc:
            exc.wall_s, exc.cache_key = time.perf_counter() - start, key
            self.events("cmx_node_failed", node_id=node.id, recipe=node.recipe.name, error=str(exc), wall_s=exc.wall_s)
            raise
        self.events("cmx_node_finished", node_id=node.id, recipe=node.recipe.name,
                    outputs=result.outputs, wall_s=result.wall_s, cached=False)
        return result

    def _effective_key(self, node: PlanNode, deps: Mapping[str, Any]) -> str:
        """The plan's key, or for a node over uncached deps, that key plus those deps'
        actual outputs (with this run's directory taken out: it differs every run)."""
        if not node.volatile:
            return node.cache_key
        outputs = rebase(thaw({a: deps[a] for a in node.volatile}), str(self.run_dir), "<run>")
        return digest([node.cache_key, outputs])[:32]

    def _run_steps(self, node: PlanNode, deps: Mapping[str, Any], key: str, start: float,
                   use_entry: bool) -> NodeResult:
        facts = FactsView(self.facts)
        with self._workspace(node, key, use_entry) as (work_dir, staging):
            frozen_deps = freeze(deps)
            step_outputs: dict[str, Mapping[str, Any]] = {}
            parts: list[ResultPart] = []
            artifacts: list[Artifact] = []
            for step in node.steps:
                result = self._run_step(node, step, work_dir, frozen_deps, step_outputs, facts)
                step_outputs[step.id] = freeze(dict(result.outputs))
                parts.extend([result.result] if result.result else [])
                artifacts.extend(result.artifacts)
            outputs = self._declared_outputs(node, work_dir, frozen_deps, step_outputs, facts)
            if staging is not None:
                entry = self._commit(node, staging, outputs, facts.read, parts, artifacts)
                outputs = dict(entry.outputs)
                artifacts = [Artifact(Path(rebase(str(a.path), str(staging.path), str(entry.path))), a.kind)
                             for a in artifacts]
        return NodeResult(node.id, node.recipe.name, "ran", time.perf_counter() - start, key, freeze(outputs),
                          tuple(parts), tuple(artifacts))

    def _commit(self, node: PlanNode, staging: Staging, outputs: Mapping[str, Any], facts_read: set[str],
                parts: list[ResultPart], artifacts: list[Artifact]) -> CacheEntry:
        meta = self._meta(node, outputs, facts_read)
        if parts or node.measures:  # what the node measured stays with its entry
            measured_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            meta["measurement"] = measurement_meta(parts, stage_artifacts(artifacts, staging.files),
                                                   self.settings.run_id, measured_at)
        return self.cache.commit(staging, meta)

    @contextmanager
    def _workspace(self, node: PlanNode, key: str, use_entry: bool) -> Iterator[tuple[Path, Staging | None]]:
        if not use_entry:
            work_dir = self.run_dir / "nodes" / _safe(node.id)
            work_dir.mkdir(parents=True, exist_ok=True)
            yield work_dir, None
            return
        with self.cache.stage(key) as staging:
            yield staging.files, staging

    def _run_step(self, node: PlanNode, step: StepSpec, work_dir: Path, deps: Mapping[str, Any],
                  step_outputs: Mapping[str, Mapping[str, Any]], facts: FactsView) -> StepOutput:
        """The step's attempts under its recovery policy (docs/faults.md): a failed attempt
        is recorded with its fault class and run again while the policy allows."""
        policy = policy_for(self.settings.recovery, node.recipe, step)
        checkpoint = checkpoint_dir(self.run_dir, _safe(node.id), step.id) if step.checkpoint else None
        first = number = checkpoints.attempt_base() + 1  # a job-level retry's far run counts on
        while True:
            resumed = checkpoints.prepare(checkpoint) if checkpoint is not None else False
            injections = self.settings.recovery.injections if number == first else ()
            started = time.time()
            log_dir = self.run_dir / "logs" / _safe(node.id) / step.id / (f"attempt-{number}" if number > 1 else "")
            with armed(injections, log_dir / "app_metrics.txt") as fired:
                try:
                    returned = self._attempt(node, step, StepScope(work_dir, deps, step_outputs, facts),
                                             Try(number, checkpoint, log_dir))
                except NodeFailed as exc:
                    failure: NodeFailed | None = exc
                else:
                    failure = None
            ended, injected_at = time.time(), fired.fired_at if fired is not None else None
            # an injection that never struck (kill-step@50% of a step that reports no progress)
            # is not recorded as one: the provenance lists what was asked, the attempts what happened
            injected = (",".join(i.text for i in injections) or None) if injected_at is not None else None
            if failure is None:
                if number > first or injected or resumed:  # resumed: from a job-level retry's checkpoint
                    self.attempts.add(Attempt(node.id, step.id, number, started, ended, injected=injected,
                                              injected_at=injected_at, resumed=resumed))
                if checkpoint is not None and step.checkpoint is not None:
                    checkpoints.finish(checkpoint, step.checkpoint.keep)
                return returned
            fault = fault_class(failure.reason, failure.exit_code, failure.cause, sorted(log_dir.glob("*.txt")))
            self.attempts.add(Attempt(node.id, step.id, number, started, ended, fault, failure.reason,
                                      work_lost(started, ended, checkpoint), injected, injected_at, resumed))
            if not policy.retries(fault, number):
                raise failure
            backoff(policy, number)
            number += 1

    def _attempt(self, node: PlanNode, step: StepSpec, scope: StepScope, attempt: Try) -> StepOutput:
        work_dir, deps, facts, log_dir = scope.work_dir, scope.deps, scope.facts, attempt.log_dir
        step_outputs = scope.step_outputs
        step_type = self.registry.step(step.uses)
        context = self._template_context(node, work_dir, deps, step_outputs, facts)
        where = f"{node.recipe.path}: steps.{step.index}.with"
        params = render_value(dict(step.with_), context, where)
        log_dir.mkdir(parents=True, exist_ok=True)
        ctx = StepContext(
            node_id=node.id, recipe=node.recipe.name, params=freeze(params), inputs=freeze(node.inputs),
            deps=deps, facts=facts, variations=freeze(node.variations),
            work_dir=work_dir, log_dir=log_dir, run_dir=self.run_dir, cache_dir=self.cache.root,
            timeout_s=step.timeout_s, recipe_dir=node.recipe.path.parent,
            metrics=step_metrics(node.id, step.id, log_dir), checkpoint_dir=attempt.checkpoint, attempt=attempt.number,
            measures=step.measures if step.measures is not None else step_type.measures,
            launchers=self.registry.launchers,
            detector_plugins=frozenset(d.plugin for d in self.registry.detectors.values()),
        )
        try:
            with BOARD.running(node.id, step.id, step.uses):  # the live progress line (cli/progress.py)
                returned = step_type.run(ctx)
        except StepFailed as exc:
            raise NodeFailed(node.id, step.id, str(exc)).classified(log_dir, exc.ended) from None
        except CmxError as exc:
            raise NodeFailed(node.id, step.id, str(exc), exit_code=exc.exit_code) from None
        except Exception as exc:  # noqa: BLE001 - a plugin bug becomes one line + a saved traceback

            trace = log_dir / "traceback.txt"
            trace.write_text(traceback.format_exc())
            message = f"{step.uses} raised {type(exc).__name__}: {exc}{self._module_hint(step_type, exc)} " \
                f"(traceback: {trace})"
            raise NodeFailed(node.id, step.id, message).classified(log_dir, None) from None
        return returned if isinstance(returned, StepOutput) else StepOutput(outputs=dict(returned))

    def _module_hint(self, step_type: StepType, exc: Exception) -> str:
        """For a ``ModuleNotFoundError``: the plugin extra that brings the module, if any."""
        info = self.registry.plugins.get(step_type.plugin or "")
        if not isinstance(exc, ModuleNotFoundError) or info is None:
            return ""

        return missing_module_hint(info.distribution, exc.name or "")

    def _template_context(self, node: PlanNode, work_dir: Path, deps: Mapping[str, Any],
                          step_outputs: Mapping[str, Mapping[str, Any]], facts: FactsView) -> dict[str, Any]:
        return {
            "inputs": node.inputs, "variation": groups_of(node), "variations": list(node.variations),
            "facts": facts, "deps": deps, "steps": step_outputs,
            "node": {"dir": str(work_dir), "id": node.id}, "run": {"dir": str(self.run_dir)},
        }

    def _declared_outputs(self, node: PlanNode, work_dir: Path, deps: Mapping[str, Any],
                          step_outputs: Mapping[str, Mapping[str, Any]], facts: FactsView) -> dict[str, Any]:
        context = self._template_context(node, work_dir, deps, step_outputs, facts)
        outputs: dict[str, Any] = {}
        for name, spec in node.recipe.outputs.items():
            if spec.value is not None:
                outputs[name] = render_value(spec.value, context, f"{node.recipe.path}: outputs.{name}.value")
                continue
            outputs[name] = None
            for produced in step_outputs.values():
                if name in produced:
                    outputs[name] = produced[name]
        plain: dict[str, Any] = thaw(outputs)
        return plain

    def _meta(self, node: PlanNode, outputs: Mapping[str, Any], facts_read: set[str]) -> dict[str, Any]:
        return {
            "recipe": node.recipe.name, "recipe_version": node.recipe.version, "node": node.id,
            "source": str(node.recipe.path), "key_parts": dict(node.key_parts),
            "key_values": node.key_values, "outputs": outputs, "cmx_version": __version__,
            "expires_s": node.recipe.cache.expires_s,
            "facts_read": {name: digest(self.facts.try_get(name)) for name in sorted(facts_read)},
        }


def entry_invalid(entry: Any, node: PlanNode, facts: FactStore, registry: Registry) -> str | None:
    """Why a cache entry that exists cannot be used for ``node`` (None if it can): a fact a
    step read while running has changed, or a step type's own validator refuses it."""
    for name, recorded in (entry.meta.get("facts_read") or {}).items():
        if digest(facts.try_get(name)) != recorded:
            return f"fact '{name}' changed"
    for step in node.steps:
        step_type = registry.steps.get(step.uses)
        if step_type is not None and step_type.validate is not None:
            try:
                ok = step_type.validate(freeze(entry.outputs))
            except Exception as exc:  # noqa: BLE001 - a failing validator means "recompute"
                return f"{step.uses} validator failed: {exc}"
            if not ok:
                return f"{step.uses} validator refused the entry"
            _report_validator(step.uses, step_type.validate, entry.path)
    return None


def _report_validator(step: str, validate: Any, entry_path: Path) -> None:
    """The read recorder must call this validator again on the entry (if it can)."""
    if reads.active() is None:
        return

    ref = reference(validate)
    if ref is None:
        reads.refuse(f"step type {step}: validator cannot be found by name")
    else:
        reads.validator(step, ref, str(entry_path / META))


def _safe(node_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in node_id)
