"""``cmx sweep --search`` (#51): an Optuna sampler (Gaussian process or TPE) chooses each
next point of the ``--matrix`` space, and each point is an ordinary recorded run of the sweep.

The space is the matrix's grid: a number axis is searched as an ordered index over its
levels, a text axis as a category, so every trial is a point of the grid and keeps the grid
sweep's point index, record and run directory (``cmx results compare --sweep ID`` reads it
the same way). The study lives beside the sweep in an SQLite database (``study.db``):
``cmx sweep --resume ID`` loads it and continues. A trial the kill cut short is told to the
study as failed and its point asked again (it was never measured); a point the sampler
proposes again is answered with its measured value without running it, so no point is
measured twice. Constraints (``NAME<=X``) go to the sampler as Optuna's constraint values;
a point that breaks one stays recorded, and is never the best.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cmx_core.results.numbers import finite_number
from cmx_core.sweep.search_spec import SearchSpec

STUDY_FILE = "study.db"
BROKEN = 1e300
"""The violation recorded for a constraint whose metric the run did not give."""


@dataclass(frozen=True)
class Measured:
    """What one point gave: the objective's value (None: the run failed or is invalid, or
    lacks the metric), each constraint's violation (0 or less: met) and the run."""

    value: float | None
    violations: tuple[float, ...] = ()
    run_id: str | None = None
    wall_s: float = 0.0
    message: str = ""
    pruned: bool = False
    """Stopped early: its live series showed it hopeless (``message`` says at which report)."""

    @property
    def feasible(self) -> bool:
        return self.value is not None and all(v <= 0 for v in self.violations)


class Watch(Protocol):
    """What a running point tells the study of its live series."""

    def seen(self, step: int, value: float) -> str:
        """The ``step``-th reported value of the watched series; a reason to prune the point
        now, or "" to let it run."""
        ...


Evaluate = Callable[[int, "Watch | None"], Measured]
"""Measures the point of the grid at an index (the CLI runs it; a benchmark may look it up),
telling the watch (None: no pruning) its live series as it runs."""


class TrialWatch:
    """A trial's live values to Optuna's pruner (``Trial.report``, ``Trial.should_prune``)."""

    def __init__(self, trial: Any, metric: str) -> None:
        self.trial = trial
        self.metric = metric
        self.last: float | None = None

    def seen(self, step: int, value: float) -> str:
        self.trial.report(value, step)
        self.last = value
        if not self.trial.should_prune():
            return ""
        return (f"pruned at report {step} of {self.metric} ({value:g}): worse than the median of the "
                "completed points at that report")


@dataclass(frozen=True)
class Trial:
    """One measured point, in the order the search measured them."""

    index: int
    value: float | None
    feasible: bool
    run_id: str | None
    filled: bool = False
    state: str = "measured"
    """``measured`` (feasible), ``infeasible`` (broke a constraint), ``failed`` (no trusted
    value) or ``pruned`` (stopped early: its live series showed it hopeless)."""
    message: str = ""
    live: float | None = None
    """The last value of its live series the search saw (a pruned point's only evidence)."""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "value": self.value, "state": self.state, "run_id": self.run_id,
                "filled": self.filled, "message": self.message, "live": self.live}


@dataclass(frozen=True)
class Outcome:
    """What the search found: the measured trials in order, the best feasible one, the
    runner-up and why it stopped."""

    spec: SearchSpec
    grid_size: int
    trials: tuple[Trial, ...]
    stopped: str

    def best(self) -> Trial | None:
        return _ranked(self)[0] if _ranked(self) else None

    def runner_up(self) -> Trial | None:
        ranked = _ranked(self)
        return ranked[1] if len(ranked) > 1 else None

    def trajectory(self) -> list[float | None]:
        """The best feasible value after each measured run."""
        best: float | None = None
        path = []
        for trial in self.trials:
            if trial.feasible and trial.value is not None and (best is None or self._better(trial.value, best)):
                best = trial.value
            path.append(best)
        return path

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.spec.maximize else a < b


def _ranked(outcome: Outcome) -> list[Trial]:
    """The feasible trials, best first (each point once: a point is measured once)."""
    scored = [(t.value, t) for t in outcome.trials if t.feasible and t.value is not None]
    scored.sort(key=lambda pair: -pair[0] if outcome.spec.maximize else pair[0])
    return [t for _, t in scored]


class Space:
    """The grid of the matrix axes, as Optuna distributions and back."""

    def __init__(self, axes: Sequence[tuple[str, Sequence[str]]]) -> None:
        self.axes = [(key, list(levels)) for key, levels in axes]
        self.numeric = {key: all(finite_number(v) is not None for v in levels) for key, levels in self.axes}

    @property
    def size(self) -> int:
        return math.prod(len(levels) for _, levels in self.axes)

    def points(self) -> list[dict[str, str]]:
        """Every point, in the grid sweep's order (the cartesian product of the axes)."""
        keys = [key for key, _ in self.axes]
        return [dict(zip(keys, row, strict=True)) for row in itertools.product(*(lv for _, lv in self.axes))]

    def distributions(self) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, IntDistribution  # deferred: optuna only here

        return {key: IntDistribution(0, len(levels) - 1) if self.numeric[key] and len(levels) > 1
                else CategoricalDistribution(levels) for key, levels in self.axes}

    def index(self, params: Mapping[str, Any]) -> int:
        """The grid index of a trial's parameters (mixed radix, the last axis fastest)."""
        index = 0
        for key, levels in self.axes:
            raw = params[key]
            position = int(raw) if self.numeric[key] and len(levels) > 1 else levels.index(str(raw))
            index = index * len(levels) + position
        return index

    def params(self, index: int) -> dict[str, Any]:
        """The trial parameters of a grid index (to ask for a point again)."""
        values: dict[str, Any] = {}
        for key, levels in reversed(self.axes):
            index, position = divmod(index, len(levels))
            values[key] = position if self.numeric[key] and len(levels) > 1 else levels[position]
        return dict(reversed(list(values.items())))


def search(spec: SearchSpec, space: Space, folder: Path | None, study_name: str, evaluate: Evaluate) -> Outcome:
    """Run (or continue) the search whose study is in ``folder`` until its budget is spent or
    every point is measured (``folder`` None: a study in memory, for a benchmark that
    replays recorded values).

    A sampler may propose a point it has measured (a Gaussian process keeps proposing its
    optimum): that trial is answered with the measured value, nothing runs, and the next
    trial is an unmeasured point drawn at random (seeded), marked ``filled``, so each run
    measures something new."""
    study = _study(spec, folder, study_name, space.size)
    _reconcile(study, space)
    distributions = space.distributions()
    fill = random.Random(f"{spec.seed}:{study_name}")
    stopped = ""
    while not stopped:
        ran = _ran(study)
        stopped = _spent(ran, spec, space)
        if stopped:
            break
        trial = study.ask(distributions)
        index = space.index(trial.params)
        earlier = ran.get(index)
        if earlier is not None:
            _tell_again(study, trial, earlier)
            _enqueue_unmeasured(study, space, set(ran), fill)
            continue
        trial.set_user_attr("index", index)  # persisted before the run: a resume knows which point it was
        watch = TrialWatch(trial, spec.prune) if spec.prune else None
        measured = evaluate(index, watch)
        if watch is not None and watch.last is not None:
            trial.set_user_attr("live", watch.last)
        _tell(study, trial, measured, [c.text() for c in spec.constraints])
    return Outcome(spec, space.size, _trials(study), stopped)


def _enqueue_unmeasured(study: Any, space: Space, measured: set[int], fill: random.Random) -> None:
    """The next trial: a point no trial has measured, drawn at random."""
    left = [i for i in range(space.size) if i not in measured]
    if left:
        study.enqueue_trial(space.params(fill.choice(left)), user_attrs={"filled": True})


def _study(spec: SearchSpec, folder: Path | None, name: str, size: int) -> Any:
    """The study: TPE (multivariate, so axes that act together are modelled together) or the
    Gaussian-process sampler, after :func:`startup_trials` random points; either reads the
    constraints each trial sets."""
    import warnings  # deferred: only a search needs it

    import optuna  # deferred: optuna only when a search runs (its import is heavy)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():  # multivariate TPE is marked experimental, though stable since Optuna 2.2
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.GPSampler(seed=spec.seed, n_startup_trials=startup_trials(size)) \
            if spec.sampler == "gp" else \
            optuna.samplers.TPESampler(seed=spec.seed, n_startup_trials=startup_trials(size), multivariate=True)
    storage = None if folder is None else f"sqlite:///{folder / STUDY_FILE}"
    pruner = optuna.pruners.MedianPruner(n_startup_trials=startup_trials(size), n_warmup_steps=0) \
        if spec.prune else optuna.pruners.NopPruner()
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner,
                               direction="maximize" if spec.maximize else "minimize", load_if_exists=True)


def startup_trials(size: int) -> int:
    """Random points before TPE models the results: Optuna's 10 is a fifth of a 48-point grid,
    so an eighth of the grid, between 3 and 10."""
    return max(3, min(10, size // 8))


def _reconcile(study: Any, space: Space) -> None:
    """Trials a killed search left running: failed in the study (their point was not
    measured), and their point asked for again first."""
    import optuna  # deferred: as _study

    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        if "index" in trial.user_attrs:
            study.enqueue_trial(space.params(int(trial.user_attrs["index"])))


def _ran(study: Any) -> dict[int, Any]:
    """Each measured point's grid index and the trial that ran it (one run a point: a
    proposal of a measured point is answered without running it)."""
    return {int(t.user_attrs["index"]): t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("ran")}


def _spent(ran: dict[int, Any], spec: SearchSpec, space: Space) -> str:
    """Why the search stops now, or "" to go on."""
    if spec.budget_runs is not None and len(ran) >= spec.budget_runs:
        return f"the budget of {spec.budget_runs} runs is spent"
    wall = sum(float(t.user_attrs.get("wall_s", 0.0)) for t in ran.values())
    if spec.budget_s is not None and wall >= spec.budget_s:
        return f"the budget of {spec.budget_s:g} s of runs is spent ({wall:.1f} s)"
    if len(ran) >= space.size:
        return f"every point of the space ({space.size}) is measured"
    return ""


def _tell_again(study: Any, trial: Any, earlier: Any) -> None:
    """A proposal of a measured point: its measured value again, nothing run."""
    import optuna  # deferred: as _study

    trial.set_user_attr("index", earlier.user_attrs["index"])
    trial.set_user_attr("repeat_of", earlier.number)
    trial.set_user_attr("violations", earlier.user_attrs.get("violations") or [])
    for name, value in earlier.constraints.items():
        trial.set_constraint(name, value)
    if earlier.state == optuna.trial.TrialState.COMPLETE:
        study.tell(trial, earlier.value)
    elif earlier.state == optuna.trial.TrialState.PRUNED and earlier.intermediate_values:
        last = max(earlier.intermediate_values)  # Optuna scores a pruned trial by its last report
        trial.report(earlier.intermediate_values[last], last)
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)


def _tell(study: Any, trial: Any, measured: Measured, names: Sequence[str]) -> None:
    """The point's value to the study, and its constraints as Optuna's (0 or less: met;
    a metric the run lacks counts as broken)."""
    import optuna  # deferred: as _study

    trial.set_user_attr("ran", True)
    trial.set_user_attr("wall_s", measured.wall_s)
    trial.set_user_attr("run_id", measured.run_id)
    trial.set_user_attr("violations", [min(v, BROKEN) for v in measured.violations])
    for name, violation in zip(names, measured.violations, strict=True):
        trial.set_constraint(name, min(violation, BROKEN))
    if measured.message:
        trial.set_user_attr("message", measured.message)
    if measured.pruned:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    elif measured.value is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, measured.value)


def _trials(study: Any) -> tuple[Trial, ...]:
    import optuna  # deferred: as _study

    out = []
    for trial in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if not trial.user_attrs.get("ran"):
            continue
        complete = trial.state == optuna.trial.TrialState.COMPLETE
        feasible = complete and all(v <= 0 for v in trial.user_attrs.get("violations") or [])
        out.append(Trial(int(trial.user_attrs["index"]), trial.value if complete else None, feasible,
                         trial.user_attrs.get("run_id"), bool(trial.user_attrs.get("filled")),
                         _state(trial.state.name, complete, feasible), str(trial.user_attrs.get("message", "")),
                         trial.user_attrs.get("live")))
    return tuple(out)


def _state(name: str, complete: bool, feasible: bool) -> str:
    if name == "PRUNED":
        return "pruned"
    if not complete:
        return "failed"
    return "measured" if feasible else "infeasible"
