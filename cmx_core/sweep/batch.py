"""A sweep through an executor's batch entry (``Executor.run_many``): every point planned in
this process, all of them handed to the executor at once, each outcome recorded as a run.

``cmx sweep --executor slurm`` (one job array) and ``--executor ray`` (Ray tasks over one
connection) take this path; an executor without ``run_many`` keeps one ``cmx run`` process
per point (:mod:`cmx_core.sweep.runner`). A point here gets what such a process would give it: one
engine session plans every point (its plan checked as ``cmx plan`` would, for the chosen
executor), writes its ``plan.json`` and ``lock.json`` into ``<data>/sweeps/<id>/point-<N>/``
and marks it in flight; the outcomes are recorded (``result.json``, ``nodes.json``,
``facts.json``, the index row) with ``provenance.sweep = {id, index, point}``, exactly as
:func:`cmx_core.run.engine.run` records a run. A point whose planning fails is a failed point
with its one-line message; the others still run. A failure of the batch as a whole (a
scheduler that refuses the array) is recorded as an error result for every point, as the
engine records an executor's own failure. Ctrl-C cancels the batch and raises
:class:`~cmx_core.errors.Interrupted`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx_core import paths
from cmx_core.datautil import atomic_write, digest
from cmx_core.errors import CmxError, Interrupted, UsageError
from cmx_core.plugins.events import registry_events
from cmx_core.plugins.loader import get_registry
from cmx_core.plugins.registry import ExecutionContext, ExecutionRequest
from cmx_core.providers.recovery import Recovery
from cmx_core.providers.types import RunError
from cmx_core.recipes.retries import policy_from_options
from cmx_core.results.store import ResultStore
from cmx_core.run import engine, inflight
from cmx_core.run.engine import executor_exit_code
from cmx_core.run.recording import failed_outcome, record_run
from cmx_core.run.request import ExecutorChoice
from cmx_core.run.runids import new_run_id
from cmx_core.sweep.dirs import fresh_run_dir, run_dirs

if TYPE_CHECKING:
    from cmx_core.plan.planner import Plan
    from cmx_core.plugins.registry import ExecutionRequest, Executor
    from cmx_core.providers.types import ExecutionOutcome, ExecutorSettings
    from cmx_core.run.engine import Session
    from cmx_core.run.recording import Provenance


@dataclass(frozen=True)
class PointOutcome:
    """How one point ended: ``status`` is the result's (``valid``, ``error`` ...) or
    ``failed`` when the point's process wrote no result."""

    index: int
    point: Mapping[str, str]
    status: str
    exit_code: int
    run_id: str | None = None
    result_path: str | None = None
    message: str = ""
    wall_s: float = 0.0
    warnings: tuple[str, ...] = ()
    """The point's result's noise warnings and notes (:func:`point_warnings`), which
    ``cmx sweep`` prints beside the point."""

    @property
    def failed(self) -> bool:
        return self.exit_code != 0


@dataclass(frozen=True)
class PointOptions:
    """The ``cmx run`` options a sweep hands every point, as the batch path understands them."""

    recipes: tuple[str, ...] = ()
    facts: str | None = None
    no_cache: bool = False
    container: bool = False
    executor: str | None = None
    executor_opts: tuple[str, ...] = ()
    retries: str | None = None
    retry_on: str | None = None
    retry_backoff: str | None = None

    def recovery(self) -> Recovery:
        """The recovery policy every point's run gets (``--retries``...; no injections: a
        sweep with ``--inject`` runs one process per point)."""
        return Recovery(policy_from_options(self.retries, self.retry_on, self.retry_backoff))

    def executor_name(self, given: str | None) -> str | None:
        return given or ("docker" if self.container else self.executor)

    def settings_options(self) -> dict[str, str]:
        """``--executor-opt KEY=VALUE`` as a mapping; a malformed one is a one-line UsageError."""
        options: dict[str, str] = {}
        for pair in self.executor_opts:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--executor-opt {pair!r}: expected KEY=VALUE, e.g. memory=8g")
            options[key.strip()] = value
        return options


_VALUED = {"--recipes": "recipes", "--facts": "facts", "--executor": "executor", "--executor-opt": "executor_opts",
           "--retries": "retries", "--retry-on": "retry_on", "--retry-backoff": "retry_backoff"}
_FLAGS = {"--no-cache": "no_cache", "--container": "container"}


def parse_point_options(argv: Sequence[str]) -> PointOptions | None:
    """``run_options`` as :class:`PointOptions`; None when they hold anything else (only a
    ``cmx run`` process understands it: the sweep then runs one per point)."""
    found: dict[str, Any] = {"recipes": [], "executor_opts": []}
    pending = list(argv)
    while pending:
        arg = pending.pop(0)
        name, sep, value = arg.partition("=")
        if name in _FLAGS and not sep:
            found[_FLAGS[name]] = True
            continue
        if name not in _VALUED:
            return None
        if not sep:
            if not pending:
                return None
            value = pending.pop(0)
        field_name = _VALUED[name]
        if isinstance(found.get(field_name), list):
            found[field_name].append(value)
        else:
            found[field_name] = value
    return PointOptions(recipes=tuple(found.pop("recipes")), executor_opts=tuple(found.pop("executor_opts")),
                        **found)


def batch_executor(name: str | None) -> Executor | None:
    """The registered executor ``name`` when it has a batch entry (None: it has none, or
    no executor was named, which means local or docker)."""
    if name is None:
        return None

    chosen = get_registry().executors.get(name)
    return chosen if chosen is not None and chosen.run_many is not None else None


@dataclass(frozen=True)
class Prepared:
    """A point ready to run: its request and what its result's provenance says."""

    index: int
    request: ExecutionRequest
    provenance: Provenance


@dataclass(frozen=True)
class BatchSweep:
    """One sweep's batch: where its points go and how they run."""

    sweep_id: str
    folder: Path
    tags: str
    base_inputs: Mapping[str, str]
    matrix: Sequence[Mapping[str, str]]
    chosen: Executor
    options: PointOptions
    jobs: int
    indices: tuple[int, ...] = ()
    """The points to run (a resumed sweep runs only those without a successful result)."""
    planned: Planned | None = None
    """The plans the sweep's check made (each point is planned once, not again here)."""
    on_recorded: Callable[[PointOutcome], PointOutcome] | None = None
    """Called as soon as a point's result is recorded (the sweep's point record); returns
    the outcome that stands (an earlier successful one, if the point already had it)."""


@dataclass(frozen=True)
class Planned:
    """The checked plans of a sweep's points, by index, and the session that made them."""

    session: Session
    plans: Mapping[int, Plan]

    def contexts(self, settings: ExecutorSettings) -> list[ExecutionContext]:
        """Each point's :class:`ExecutionContext` (in index order) for an executor's ``settings``."""
        return [ExecutionContext(self.plans[i], settings, self.session.facts, self.session.registry)
                for i in sorted(self.plans)]


def plan_points(tags: str, base_inputs: Mapping[str, str], matrix: Sequence[Mapping[str, str]],
                indices: Sequence[int], options: PointOptions, executor: str | None) -> Planned:
    """Plan and check each point as ``cmx plan`` would (inputs, values, executor settings);
    the first bad one is a one-line UsageError naming it (exit 2, before anything runs)."""
    session = engine.open_session(options.recipes, options.facts)
    settings_options = options.settings_options()
    plans: dict[int, Plan] = {}
    for index in indices:
        try:
            plans[index] = engine.plan_in(session, tags, point_inputs(base_inputs, matrix[index]),
                                          ExecutorChoice(options.executor_name(executor), settings_options))
        except CmxError as exc:
            values = " ".join(f"{k}={v}" for k, v in matrix[index].items())
            raise UsageError(f"cmx sweep: point {index} ({values}): {exc}") from None
    return Planned(session, plans)


def point_inputs(base_inputs: Mapping[str, str], point: Mapping[str, str]) -> dict[str, str]:
    return {key.replace("-", "_"): value for key, value in {**base_inputs, **point}.items()}


def run_points(batch: BatchSweep, on_point: Callable[[PointOutcome, int], None] | None = None
               ) -> tuple[PointOutcome, ...]:
    """Plan every point, run the planned ones as one batch, record each; outcomes in order."""
    session = batch.planned.session if batch.planned is not None else \
        engine.open_session(batch.options.recipes, batch.options.facts)
    ResultStore(paths.results_db()).check()  # a corrupt store fails now, not after the batch
    orphans = inflight.orphans_under(batch.folder) if batch.chosen.adopts else {}
    session.cache.clean_staging()
    settings_options = batch.options.settings_options()
    outcomes: dict[int, PointOutcome] = {}
    prepared: list[Prepared] = []
    try:
        for index in batch.indices or range(len(batch.matrix)):
            point = batch.matrix[index]
            try:
                prepared.append(_prepare(batch, session, index, point, settings_options, orphans))
            except CmxError as exc:
                outcomes[index] = _recorded(batch, _unplanned(index, point, exc))
        inflight.reap()  # after the adopted runs are marked as this driver's: only the others are interrupted
        if prepared:
            for index, outcome in zip((p.index for p in prepared), _run(batch, session, prepared), strict=True):
                outcomes[index] = outcome
    finally:  # recorded, failed or interrupted (Ctrl-C while planning too): no point stays marked
        for item in prepared:
            inflight.clear(item.request.run_id)
    ordered = tuple(outcomes[i] for i in sorted(outcomes))
    if on_point is not None:
        for outcome in ordered:
            on_point(outcome, len(ordered))
    return ordered


def _prepare(batch: BatchSweep, session: Session, index: int, point: Mapping[str, str],
             settings_options: Mapping[str, str], orphans: Mapping[Path, str]) -> Prepared:
    """Plan and check the point (as ``cmx plan`` would), write its plan and lock into its
    run directory and mark it in flight. A point a killed driver left running (``orphans``,
    for an executor that ``adopts``) keeps its run directory and run id when its lock is
    the same: the executor takes over its job."""
    planned = batch.planned.plans.get(index) if batch.planned is not None else None
    the_plan = planned or engine.plan_in(session, batch.tags, point_inputs(batch.base_inputs, point),
                                         ExecutorChoice(batch.chosen.name, settings_options))
    settings = engine.executor_settings(batch.chosen, settings_options)
    adopted = _adoptable(batch.folder, index, orphans, the_plan, session)
    run_dir, run_id = adopted if adopted is not None else (fresh_run_dir(batch.folder, index).resolve(), new_run_id())
    if adopted is None and run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise UsageError(f"{run_dir}: exists and is not an empty directory; run the sweep again (a new id)")
    lock = engine.lock_json(the_plan, session.registry, session.repos)
    context = ExecutionContext(the_plan, settings, session.facts, session.registry,
                               recovery=batch.options.recovery())
    request = ExecutionRequest(context, run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=run_id,
                               use_cache=not batch.options.no_cache)
    provenance = engine.run_provenance(digest(lock), session,
                                       {"id": batch.sweep_id, "index": index, "point": dict(point)})
    # marked before the directory exists, as a single run is: a kill at any point leaves it recorded
    inflight.mark(request.run_id, run_dir, engine.interrupted_document(request, provenance))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(run_dir / "plan.json", the_plan.to_json())
        _write_json(run_dir / "lock.json", lock)
    except BaseException:
        inflight.clear(request.run_id)
        raise
    return Prepared(index, request, provenance)


def _adoptable(folder: Path, index: int, orphans: Mapping[Path, str], the_plan: Plan,
               session: Session) -> tuple[Path, str] | None:
    """The point's last run directory and run id when a killed driver left it running and
    its lock is the one this plan makes (else the job ran something else: not adopted)."""
    dirs = run_dirs(folder, index)
    last = dirs[-1].resolve() if dirs else None
    if last is None or last not in orphans:
        return None
    try:
        shipped = json.loads((last / "lock.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    with tempfile.TemporaryDirectory() as scratch:
        same = engine.write_lock(Path(scratch), the_plan, session.registry, session.repos) == digest(shipped)
    return (last, orphans[last]) if same else None


def _run(batch: BatchSweep, session: Session, prepared: Sequence[Prepared]) -> list[PointOutcome]:
    """The batch entry once for every prepared point, then each outcome recorded."""
    requests = [p.request for p in prepared]
    events = registry_events(session.registry)
    recorded: dict[int, PointOutcome] = {}

    def record(position: int, outcome: ExecutionOutcome) -> None:
        """Record one point now (its result, index row and sweep record), once."""
        if not 0 <= position < len(prepared) or position in recorded:
            raise CmxError(f"{batch.chosen.name} executor: run_each handed over an outcome for run {position} "
                           f"of {len(prepared)} twice or out of range; it must hand over one per run")
        item = prepared[position]
        path, document = record_run(item.request, outcome, item.provenance, events)
        inflight.clear(item.request.run_id)
        recorded[position] = _recorded(batch, _point_outcome(item, outcome, path, document,
                                                             batch.matrix[item.index]))

    started = time.time()
    try:
        if batch.chosen.run_each is not None:
            batch.chosen.run_each(requests, batch.jobs, record)
        else:
            assert batch.chosen.run_many is not None
            results: Sequence[ExecutionOutcome] = batch.chosen.run_many(requests, batch.jobs)
            if len(results) != len(requests):
                raise CmxError(f"{batch.chosen.name} executor: run_many returned {len(results)} outcomes for "
                               f"{len(requests)} runs; it must return one per run, in order")
            for position, outcome in enumerate(results):
                record(position, outcome)
    except Interrupted:
        raise
    except CmxError as exc:  # the batch itself could not run: an error result for every point left
        error = RunError(f"{batch.chosen.name} executor: {exc}", exit_code=executor_exit_code(exc))
        for position in range(len(prepared)):
            if position not in recorded:
                record(position, failed_outcome(started, error))
    missing = [p for p in range(len(prepared)) if p not in recorded]
    if missing:
        error = RunError(f"{batch.chosen.name} executor: handed over no outcome for this run", exit_code=1)
        for position in missing:
            record(position, failed_outcome(started, error))
    return [recorded[p] for p in range(len(prepared))]


def _recorded(batch: BatchSweep, outcome: PointOutcome) -> PointOutcome:
    return batch.on_recorded(outcome) if batch.on_recorded is not None else outcome


def _point_outcome(item: Prepared, outcome: ExecutionOutcome, path: Path, document: Mapping[str, Any],
                   point: Mapping[str, str]) -> PointOutcome:
    """What a ``cmx run`` of the point would have exited with and said."""
    status = str(document.get("status"))
    exit_code = 0
    message = ""
    if status == "error":
        exit_code = outcome.error.exit_code if outcome.error else 1
        message = _error_line(document)
    return PointOutcome(item.index, point, status, exit_code, run_id=str(document.get("run_id")),
                        result_path=str(path), message=message,
                        wall_s=max(0.0, (outcome.finished or time.time()) - outcome.started),
                        warnings=point_warnings(document))


def point_warnings(document: Mapping[str, Any]) -> tuple[str, ...]:
    """What a point's result warns of: each noise warning of its ``conditions`` (the busy
    machine, docs/busy-machine.md), then its ``notes`` (e.g. cmx-train's suspect
    ``scaling_efficiency`` and its likely causes)."""
    conditions = document.get("conditions")
    found = [str(w["message"]) for w in (conditions.get("warnings") or ()) if isinstance(w, Mapping)] \
        if isinstance(conditions, Mapping) else []
    notes = document.get("notes")
    return (*found, *([notes] if isinstance(notes, str) and notes else []))


def _error_line(document: Mapping[str, Any]) -> str:
    error = document.get("error")
    if isinstance(error, Mapping):
        where = ": ".join(str(error[k]) for k in ("node", "step") if error.get(k))
        text = f"{where}: {error.get('message')}" if where else str(error.get("message"))
    else:
        reasons = document.get("invalid_reasons") or ["no reason given"]
        text = f"reported errors: {reasons[0]}"
    return "cmx: error: " + " ".join(text.split())[:300]


def _unplanned(index: int, point: Mapping[str, str], exc: CmxError) -> PointOutcome:
    """A point whose plan failed: no run, exit code and message as ``cmx run`` would give."""
    message = " ".join(str(exc).split("\n")[0].split())
    return PointOutcome(index, point, "failed", exc.exit_code or 1, message=f"cmx: error: {message}"[:300])


def _write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=True, default=str))
