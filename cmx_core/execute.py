"""The local executor: runs a plan's nodes in topological order, independent nodes in
parallel with ``-j N``.

Each step gets an immutable snapshot (read-only mappings, tuples) of its parameters, the
node's inputs and its deps' declared outputs; only the recipe's declared outputs leave a
node. Cached nodes run in a staging directory that becomes the cache entry only when every
step succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmx_core import __version__
from cmx_core.cache import Cache, rebase
from cmx_core.datautil import freeze, thaw
from cmx_core.errors import CmxError, Interrupted, StepFailed
from cmx_core.facts import FactStore
from cmx_core.planner import Plan, PlanNode, digest
from cmx_core.plugins import Registry, call_event, get_registry
from cmx_core.providers import (
    Artifact,
    ExecutionRequest,
    ResultPart,
    StepContext,
    StepOutput,
)
from cmx_core.recipe import StepSpec
from cmx_core.template import render_value

if TYPE_CHECKING:
    from concurrent.futures import Future


class NodeFailed(StepFailed):
    """A step of a node failed; names the node and the step."""

    def __init__(self, node_id: str, step_id: str, message: str) -> None:
        self.node_id = node_id
        self.step_id = step_id
        self.reason = message
        super().__init__(f"{node_id} / step {step_id}: {message}")


class NodeOutcome(NamedTuple):
    node_id: str
    outputs: Mapping[str, Any]
    cached: bool
    wall_s: float
    cache_key: str
    parts: Sequence[ResultPart] = ()
    artifacts: Sequence[Artifact] = ()


@dataclass
class RunOutcome:
    """What running a plan produced (or how far it got before failing)."""

    plan: Plan
    run_dir: Path
    outcomes: dict[str, NodeOutcome]
    started: float
    finished: float = 0.0
    error: NodeFailed | None = None

    @property
    def root_outputs(self) -> Mapping[str, Any]:
        root = self.outcomes.get(self.plan.root.id)
        return root.outputs if root else {}

    def result_part(self) -> ResultPart | None:
        """The root's last result part, else the last one any node produced."""
        root = self.outcomes.get(self.plan.root.id)
        if root and root.parts:
            return root.parts[-1]
        parts = [p for n in self.plan.nodes if n.id in self.outcomes for p in self.outcomes[n.id].parts]
        return parts[-1] if parts else None

    def artifacts(self) -> list[Artifact]:
        return [a for n in self.plan.nodes if n.id in self.outcomes for a in self.outcomes[n.id].artifacts]


def run_local(request: ExecutionRequest) -> Path:
    """The ``local`` executor: run the plan here, write and return ``result.json``."""
    from cmx_core.engine import write_run_result

    outcome = execute_plan(request.plan, request.run_dir, request.options["facts"],
                           jobs=request.jobs, use_cache=request.use_cache, refresh=request.refresh)
    return write_run_result(outcome, request.options)


def execute_plan(plan: Plan, run_dir: Path, facts: FactStore, *, jobs: int = 1,
                 use_cache: bool = True, refresh: bool = False) -> RunOutcome:
    """Run every node; a failure stops scheduling and is recorded in ``error``."""
    runner = NodeRunner(plan, run_dir, facts, get_registry(), Cache(), use_cache, refresh)
    outcome = RunOutcome(plan, run_dir, {}, time.time())
    try:
        if jobs <= 1:
            for node in plan.nodes:
                outcome.outcomes[node.id] = runner.run(node, outcome.outcomes)
        else:
            _run_parallel(plan, runner, outcome.outcomes, jobs)
    except NodeFailed as exc:
        outcome.error = exc
    except KeyboardInterrupt:
        from cmx_core.builtin import kill_running

        kill_running()
        raise Interrupted("interrupted; no partial result or cache entry was kept") from None
    outcome.finished = time.time()
    return outcome


def _run_parallel(plan: Plan, runner: NodeRunner, done: dict[str, NodeOutcome], jobs: int) -> None:
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    pending = {n.id: n for n in plan.nodes}
    running: dict[Future[NodeOutcome], str] = {}
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
            from cmx_core.builtin import kill_running

            kill_running()
            raise


class NodeRunner:
    """Runs one node: cache lookup, steps in order, declared outputs, cache commit."""

    def __init__(self, plan: Plan, run_dir: Path, facts: FactStore, registry: Registry,
                 cache: Cache, use_cache: bool, refresh: bool) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.facts = facts
        self.registry = registry
        self.cache = cache
        self.use_cache = use_cache
        self.refresh = refresh

    def run(self, node: PlanNode, done: Mapping[str, NodeOutcome]) -> NodeOutcome:
        start = time.perf_counter()
        deps = {alias: done[dep].outputs for alias, dep in node.deps.items()}
        key = self._effective_key(node, deps)
        if not (node.cacheable and self.use_cache):
            return self._execute(node, deps, key, start, use_entry=False)
        hit = None if self.refresh else self._hit(node, key, start)
        if hit is not None:
            return hit
        with self.cache.lock(key):  # another process may have computed it meanwhile
            hit = None if self.refresh else self._hit(node, key, start)
            return hit or self._execute(node, deps, key, start, use_entry=True)

    def _hit(self, node: PlanNode, key: str, start: float) -> NodeOutcome | None:
        entry, _ = self.cache.lookup(key, node.recipe.cache.expires_s)
        if entry is None or entry_invalid(entry, node, self.facts, self.registry) is not None:
            return None
        call_event("cmx_node_started", node_id=node.id, recipe=node.recipe.name, cached=True)
        outputs = freeze(entry.outputs)
        call_event("cmx_node_finished", node_id=node.id, recipe=node.recipe.name,
                   outputs=outputs, wall_s=time.perf_counter() - start, cached=True)
        return NodeOutcome(node.id, outputs, True, time.perf_counter() - start, key)

    def _execute(self, node: PlanNode, deps: Mapping[str, Any], key: str, start: float,
                 use_entry: bool) -> NodeOutcome:
        call_event("cmx_node_started", node_id=node.id, recipe=node.recipe.name, cached=False)
        outcome = self._run_steps(node, deps, key, start, use_entry)
        call_event("cmx_node_finished", node_id=node.id, recipe=node.recipe.name,
                   outputs=outcome.outputs, wall_s=outcome.wall_s, cached=False)
        return outcome

    def _effective_key(self, node: PlanNode, deps: Mapping[str, Any]) -> str:
        """The plan's key, or for a node over uncached deps, that key plus those deps'
        actual outputs (with this run's directory taken out: it differs every run)."""
        if not node.volatile:
            return node.cache_key
        outputs = rebase(thaw({a: deps[a] for a in node.volatile}), str(self.run_dir), "<run>")
        return digest([node.cache_key, outputs])[:32]

    def _run_steps(self, node: PlanNode, deps: Mapping[str, Any], key: str, start: float,
                   use_entry: bool) -> NodeOutcome:
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
                entry = self.cache.commit(staging, self._meta(node, outputs, facts.read))
                outputs = entry.outputs
                artifacts = [Artifact(Path(rebase(str(a.path), str(staging.path), str(entry.path))), a.kind)
                             for a in artifacts]
        return NodeOutcome(node.id, freeze(outputs), False, time.perf_counter() - start, key, parts, artifacts)

    @contextmanager
    def _workspace(self, node: PlanNode, key: str, use_entry: bool) -> Iterator[tuple[Path, Any]]:
        if not use_entry:
            work_dir = self.run_dir / "nodes" / _safe(node.id)
            work_dir.mkdir(parents=True, exist_ok=True)
            yield work_dir, None
            return
        with self.cache.stage(key) as staging:
            yield staging.files, staging

    def _run_step(self, node: PlanNode, step: StepSpec, work_dir: Path, deps: Mapping[str, Any],
                  step_outputs: Mapping[str, Mapping[str, Any]], facts: FactsView) -> StepOutput:
        step_type = self.registry.step(step.uses)
        context = self._template_context(node, work_dir, deps, step_outputs, facts)
        where = f"{node.recipe.path}: steps.{step.index}.with"
        params = render_value(dict(step.with_), context, where)
        log_dir = self.run_dir / "logs" / _safe(node.id) / step.id
        log_dir.mkdir(parents=True, exist_ok=True)
        ctx = StepContext(
            node_id=node.id, recipe=node.recipe.name, params=freeze(params), inputs=freeze(node.inputs),
            deps=deps, facts=facts, variations=freeze(node.variations),
            work_dir=work_dir, log_dir=log_dir, run_dir=self.run_dir, cache_dir=self.cache.root,
            timeout_s=step.timeout_s,
        )
        try:
            with _stdout_to_stderr():  # a step's prints must not corrupt --json on stdout
                returned = step_type.run(ctx)
        except StepFailed as exc:
            raise NodeFailed(node.id, step.id, str(exc)) from None
        except CmxError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin bug becomes one line + a saved traceback
            import traceback

            trace = log_dir / "traceback.txt"
            trace.write_text(traceback.format_exc())
            raise NodeFailed(node.id, step.id, f"{step.uses} raised {type(exc).__name__}: {exc} (traceback: {trace})") from None
        return returned if isinstance(returned, StepOutput) else StepOutput(outputs=dict(returned))

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
        return thaw(outputs)

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
    return None


class FactsView(Mapping[str, Any]):
    """Read-only, lazy access to facts for steps and templates; remembers what was read."""

    def __init__(self, store: FactStore) -> None:
        self._store = store
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        value = freeze(self._store.get(name))
        self.read.add(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.available())

    def __len__(self) -> int:
        return len(self._store.available())


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    import contextlib
    import sys

    with contextlib.redirect_stdout(sys.stderr):
        yield


def groups_of(node: PlanNode) -> dict[str, str | None]:
    groups: dict[str, str | None] = {g: None for g in node.recipe.groups()}
    for name in node.variations:
        spec = node.recipe.variations.get(name) or node.recipe.variations.get(f"{name}.#")
        if spec is not None and spec.group:
            groups[spec.group] = name
    return groups


def _safe(node_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in node_id)
