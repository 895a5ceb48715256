"""A search sweep on disk: its definition (the sweep's ``sweep.json`` with the whole grid as
its matrix, and ``search.json``), its points run one at a time as ordinary recorded runs,
and its manifest listing the points it measured (:mod:`cmx_core.sweep.search`)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx_core.datautil import atomic_write, loads_bounded
from cmx_core.errors import UsageError
from cmx_core.plugins.extras import require_extra
from cmx_core.sweep.batch import PointOutcome
from cmx_core.sweep.confirm import Noise, confirm_values
from cmx_core.sweep.live import LiveWatch
from cmx_core.sweep.request import Driver, Live, OnPoint, SweepRequest
from cmx_core.sweep.runner import (
    SWEEPS_DIR,
    Axis,
    SweepResult,
    new_sweep_id,
    run_one_point,
    run_point_in,
)
from cmx_core.sweep.search import Measured, Outcome, Space, Watch, search
from cmx_core.sweep.search_spec import SearchSpec, read_search, write_search
from cmx_core.sweep.state import (
    SweepSpec,
    finished_point,
    holding,
    read_record,
    read_spec,
    record_path,
    wait_for_points,
    write_spec,
)

LIVE_DIR = "live"
MEASURED = ("valid", "completed")
"""A point's run status whose value the search trusts (an invalid run measured something else)."""


@dataclass(frozen=True)
class SearchRun:
    """The sweep of a search (every measured point) and what the search found."""

    result: SweepResult
    outcome: Outcome
    noise: Noise | None = None
    """The confirmation runs of the best and the runner-up (None: ``--confirm 0``, or fewer
    than two feasible points)."""

    def to_json(self) -> dict[str, Any]:
        best, runner_up = self.outcome.best(), self.outcome.runner_up()
        points = {p.index: dict(p.point) for p in self.result.points}
        matrix = {t.index: t for t in self.outcome.trials}
        return {**self.result.to_json(), "search": {
            **self.outcome.spec.to_json(), "grid_points": self.outcome.grid_size, "measured": len(matrix),
            "stopped": self.outcome.stopped, "filled_at_random": sum(t.filled for t in self.outcome.trials),
            "best": _trial_json(best, points),
            "runner_up": _trial_json(runner_up, points), "trajectory": self.outcome.trajectory(),
            "infeasible": [t.index for t in self.outcome.trials if t.state == "infeasible"],
            "trials": [{**t.to_json(), "point": points.get(t.index, {})} for t in self.outcome.trials],
            "noise": None if self.noise is None else self.noise.to_json()}}


def start_search(request: SweepRequest, axes: Sequence[Axis], spec: SearchSpec,
                 on_point: OnPoint | None = None) -> SearchRun:
    """A new search over the grid of ``axes`` (``request.matrix`` is that grid)."""
    if request.jobs != 1 or request.point_options:
        raise UsageError("cmx sweep --search runs one point at a time (each choice learns from the last): "
                         "drop -j and --chaos")
    require_extra("cmx-core", "learn", "cmx sweep --search")  # before anything is written
    sweep = SweepSpec(new_sweep_id(), request.tags, dict(request.base_inputs), tuple(request.matrix),
                      tuple(request.run_options), 1, request.executor)
    folder = request.data_dir / SWEEPS_DIR / sweep.sweep_id
    folder.mkdir(parents=True, exist_ok=True)
    write_spec(folder, sweep)
    write_search(folder, spec)
    return _search(sweep, spec, request.data_dir, Space([(a.key, a.values) for a in axes]), on_point)


def resume_search(sweep_id: str, data_dir: Path, on_point: OnPoint | None = None) -> SearchRun | None:
    """Continue the search of sweep ``sweep_id``; None when that sweep is a grid sweep."""
    spec = read_search(data_dir / SWEEPS_DIR / sweep_id)
    if spec is None:
        return None
    require_extra("cmx-core", "learn", "cmx sweep --search")
    sweep = read_spec(data_dir, sweep_id)
    wait_for_points(data_dir / SWEEPS_DIR / sweep_id)
    return _search(sweep, spec, data_dir, _space_of(sweep), on_point)


def _space_of(sweep: SweepSpec) -> Space:
    """The axes of a grid matrix, recovered from its points in order."""
    keys = list(sweep.matrix[0]) if sweep.matrix else []
    levels = {k: list(dict.fromkeys(point[k] for point in sweep.matrix)) for k in keys}
    return Space([(k, levels[k]) for k in keys])


def _search(sweep: SweepSpec, spec: SearchSpec, data_dir: Path, space: Space, on_point: OnPoint | None) -> SearchRun:
    folder = data_dir / SWEEPS_DIR / sweep.sweep_id
    began = time.monotonic()
    driver = Driver(on_point, batch=False)
    with holding(folder):
        outcome = search(spec, space, folder, sweep.sweep_id,
                         lambda index, watch: _evaluate(sweep, spec, folder, index, driver, watch))
        noise = _confirm(sweep, spec, folder, outcome, driver)
        points = _recorded(folder, sweep)
    result = SweepResult(sweep.sweep_id, sweep.tags, tuple(points[i] for i in sorted(points)),
                         data_dir / SWEEPS_DIR / f"{sweep.sweep_id}.json", time.monotonic() - began, sweep.executor,
                         dict(sweep.base_inputs), tuple(sweep.matrix[0]) if sweep.matrix else ())
    run = SearchRun(result, outcome, noise)
    atomic_write(result.manifest, json.dumps(run.to_json(), indent=2, sort_keys=True))  # the search with its points
    return run


def _evaluate(sweep: SweepSpec, spec: SearchSpec, folder: Path, index: int, driver: Driver,
              watch: Watch | None) -> Measured:
    """The point at ``index``: its recorded result when it has one (a run the kill cut off
    before the study heard of it), else one ``cmx run`` now (watched, when pruning: its live
    series of ``spec.prune`` goes to ``watch`` as it runs)."""
    outcome = finished_point(folder, sweep, index) or run_one_point(sweep, folder, index, driver,
                                                                     _live(folder, index, spec, watch))
    return _measured(outcome, spec)


def _measured(outcome: PointOutcome, spec: SearchSpec) -> Measured:
    """What a point's run gave the search: its value and constraint violations, or why none."""
    if outcome.status == "pruned":
        return Measured(None, run_id=outcome.run_id, wall_s=outcome.wall_s, message=outcome.message, pruned=True)
    document = _document(outcome)
    if document is None or outcome.status not in MEASURED:
        return Measured(None, run_id=outcome.run_id, wall_s=outcome.wall_s,
                        message=outcome.message or f"the run is {outcome.status}: its value is not used")
    metrics = document.get("metrics") or {}
    value = _value(metrics, spec.metric)
    violations = tuple(c.violation(v) if (v := _value(metrics, c.metric)) is not None else float("inf")
                       for c in spec.constraints)
    message = "" if value is not None else f"the run has no value of {spec.metric}"
    return Measured(value, violations, outcome.run_id, outcome.wall_s, message)


def _confirm(sweep: SweepSpec, spec: SearchSpec, folder: Path, outcome: Outcome, driver: Driver) -> Noise | None:
    """The best point and the runner-up run ``spec.confirm`` times more each (:mod:`.confirm`)."""
    best, second = outcome.best(), outcome.runner_up()
    if spec.confirm < 1 or best is None or second is None or best.value is None or second.value is None:
        return None

    def run_into(index: int, run_dir: Path) -> PointOutcome:
        outcome = run_point_in(sweep, index, run_dir, driver)
        if driver.on_point is not None:  # progress: a confirmation run is a run of that point
            driver.on_point(outcome, len(sweep.matrix))
        return outcome

    def value_of(point: PointOutcome) -> float | None:
        return _measured(point, spec).value

    more_best, lost_best = confirm_values(folder, best.index, spec.confirm, run_into, value_of)
    more_second, lost_second = confirm_values(folder, second.index, spec.confirm, run_into, value_of)
    return Noise((best.value, *more_best), (second.value, *more_second), spec.maximize, lost_best + lost_second)


def _live(folder: Path, index: int, spec: SearchSpec, watch: Watch | None) -> Live | None:
    """The point's journal (``live/point-N.jsonl``, kept: a pruned point's evidence) and its reader."""
    if watch is None or spec.prune is None:
        return None
    reader = LiveWatch(folder / LIVE_DIR / f"point-{index}.jsonl", spec.prune, watch)
    reader.reset()
    return Live(reader.path, reader.poll)


def _recorded(folder: Path, sweep: SweepSpec) -> dict[int, PointOutcome]:
    """Every point the search ran: successful ones and the failed ones' records."""
    found = {}
    for index in range(len(sweep.matrix)):
        record = read_record(record_path(folder, index))
        if record is not None:
            found[index] = record
    return found


def _document(outcome: PointOutcome) -> dict[str, Any] | None:
    if not outcome.result_path:
        return None
    try:
        value = loads_bounded(Path(outcome.result_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _value(metrics: Mapping[str, Any], name: str) -> float | None:
    value = (metrics.get(name) or {}).get("value") if isinstance(metrics.get(name), dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _trial_json(trial: Any, points: Mapping[int, dict[str, str]]) -> dict[str, Any] | None:
    if trial is None:
        return None
    return {"index": trial.index, "point": points.get(trial.index, {}), "value": trial.value,
            "run_id": trial.run_id}
