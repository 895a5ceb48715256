"""The search of a ``cmx sweep --search`` in a report: the ``search`` object of its sweep
manifest read into typed records, then the figure of its runs and a short table of what it
found. Every value shown comes from the manifest; a missing one is ``-`` with the reason,
never invented, and a trial without a value is left out of the figure, never drawn as zero.

A manifest written before a field existed (a trial's ``live``, the top-level ``noise``) reads
as that field missing."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmx_core.report import plots
from cmx_core.results.numbers import fmt_number

STATES = ("measured", "infeasible", "pruned", "failed")
"""A trial's states, in the order the report counts them."""
_STATE_WORDS = {"measured": "measured", "infeasible": "infeasible (broke a constraint)", "pruned": "pruned",
                "failed": "failed"}


@dataclass(frozen=True)
class Pick:
    """The best point or the runner-up: its grid index, axes, value and run."""

    index: int | None
    point: Mapping[str, str]
    value: float | None
    run_id: str | None


@dataclass(frozen=True)
class Trial:
    """One trial, ``number`` 1..n in the order the search measured them. ``value`` is the
    trusted value (None for a failed or pruned run); ``live`` the last value a pruned run's live
    series showed."""

    number: int
    index: int | None
    point: Mapping[str, str]
    state: str
    value: float | None
    live: float | None
    run_id: str | None
    filled: bool
    message: str


@dataclass(frozen=True)
class Noise:
    """The noise the search estimated: sigma (metric units), the runner-up's distance from the
    best in sigmas, how many samples of the two points it saw, how it was estimated, and (when
    the manifest has them) its verdict and how many confirmation runs gave no value."""

    sigma: float | None
    distance: float | None
    samples: int
    how: str
    verdict: str = ""
    lost: int | None = None


@dataclass(frozen=True)
class Search:
    """A search manifest's ``search`` object, each field None (or empty) when it is missing."""

    metric: str
    direction: str | None
    constraints: tuple[str, ...]
    sampler: str | None
    seed: int | None
    grid_points: int | None
    measured: int | None
    budget_runs: int | None
    budget_s: float | None
    stopped: str | None
    filled_at_random: int | None
    best: Pick | None
    runner_up: Pick | None
    trajectory: tuple[float | None, ...]
    trials: tuple[Trial, ...]
    noise: Noise | None


@dataclass(frozen=True)
class Fact:
    """One row of the search's summary: what, and its value (or ``-`` with the reason)."""

    label: str
    value: str


@dataclass(frozen=True)
class TrialLine:
    """One trial as the report's table shows it."""

    number: int
    point: str
    state: str
    value: str
    run: str


@dataclass(frozen=True)
class SearchSection:
    title: str
    facts: tuple[Fact, ...]
    trials: tuple[TrialLine, ...]


def read_search(manifest: Mapping[str, Any]) -> Search | None:
    """The search of a sweep manifest; None for a grid sweep (no ``search`` object)."""
    raw = manifest.get("search")
    if not isinstance(raw, Mapping):
        return None
    trials, trajectory, constraints = (_list(raw.get(k)) for k in ("trials", "trajectory", "constraints"))
    return Search(
        _text(raw.get("metric")) or "-", _text(raw.get("direction")), tuple(str(c) for c in constraints),
        _text(raw.get("sampler")), _int(raw.get("seed")), _int(raw.get("grid_points")), _int(raw.get("measured")),
        _int(raw.get("budget_runs")), _number(raw.get("budget_s")), _text(raw.get("stopped")),
        _int(raw.get("filled_at_random")), _pick(raw.get("best")), _pick(raw.get("runner_up")),
        tuple(_number(v) for v in trajectory),
        tuple(_trial(n, t) for n, t in enumerate(trials, start=1) if isinstance(t, Mapping)),
        _noise(raw.get("noise")))


def plot_of(search: Search, unit: str | None) -> plots.SearchPlot | None:
    """What the search's figure draws; None when no trial has a value to draw."""
    measured = _markers("measured (feasible)", [(t.number, t.value) for t in search.trials if t.state == "measured"])
    infeasible = _markers("broke a constraint", [(t.number, t.value) for t in search.trials
                                                 if t.state == "infeasible"])
    pruned = _markers("pruned (last live value)", [(t.number, t.live) for t in search.trials if t.state == "pruned"])
    if not (measured.x or infeasible.x or pruned.x):
        return None
    trajectory = _markers("best so far", list(enumerate(search.trajectory, start=1)))
    best = search.best
    at = next((t.number for t in search.trials if best is not None and t.index == best.index), None)
    starred = _markers("best", [(at, best.value)] if best is not None and at is not None else [])
    sigma = search.noise.sigma if search.noise else None
    band = (best.value - sigma, best.value + sigma) if best and best.value is not None and sigma is not None \
        else None
    return plots.SearchPlot(f"search: {_title(search)}", f"{search.metric} ({unit})" if unit else search.metric,
                            max(len(search.trials), len(search.trajectory)), measured, infeasible, pruned,
                            trajectory, starred, band)


def section_of(search: Search, unit: str | None) -> SearchSection:
    """The short table of what the search found, and its trials in the order it ran them."""
    facts = (
        Fact("objective", _objective(search)),
        Fact("sampler", _sampler(search)),
        Fact("measured", _measured(search)),
        Fact("stopped", search.stopped or "- (the manifest does not say why)"),
        Fact("best", _pick_text(search.best, unit) if search.best else f"- ({_no_best(search)})"),
        Fact("runner-up", _pick_text(search.runner_up, unit) if search.runner_up else
             "- (no second point met the constraints)" if search.best else "- (no best point)"),
        Fact("runner-up's distance", _distance(search)),
        Fact("noise", _noise_text(search.noise, unit)),
        Fact("trials", _counts(search.trials)),
    )
    return SearchSection(_title(search), facts, tuple(_line(t, unit) for t in search.trials))


def _title(search: Search) -> str:
    return f"{search.direction or 'search'} {search.metric}"


def _objective(search: Search) -> str:
    direction = search.direction or "- (the manifest gives no direction)"
    constraints = f" subject to {', '.join(search.constraints)}" if search.constraints else ""
    return f"{direction} {search.metric}{constraints}"


def _sampler(search: Search) -> str:
    seed = f" (seed {search.seed})" if search.seed is not None else ""
    return f"{search.sampler}{seed}" if search.sampler else f"- (not recorded){seed}"


def _measured(search: Search) -> str:
    measured = str(search.measured) if search.measured is not None else "-"
    grid = str(search.grid_points) if search.grid_points is not None else "- (grid size not recorded)"
    text = f"{measured} of {grid} grid points"
    if search.budget_runs is not None:
        text += f"; budget {search.budget_runs} runs"
    if search.budget_s is not None:
        text += f"; budget {search.budget_s:g} s"
    if search.filled_at_random:
        text += f"; {search.filled_at_random} filled at random (the sampler proposed a point it had measured)"
    return text


def _no_best(search: Search) -> str:
    """Why a search names no best point, from its trials' states."""
    states = [t.state for t in search.trials]
    if not states:
        return "no run was measured"
    if "measured" in states:
        return "the manifest names none"
    if "infeasible" in states:
        return "no measured point met the constraints"
    return f"no run gave a trusted value of {search.metric}"


def _distance(search: Search) -> str:
    """The runner-up's gap from the best in % and, when the search estimated it, in noise units."""
    best, runner = search.best, search.runner_up
    if best is None or runner is None:
        return "- (no runner-up)"
    if best.value is None or runner.value is None:
        return f"- (a value is missing); {_noise_units(search.noise)}"
    if best.value == 0:
        return f"- (the best is 0: no relative distance); {_noise_units(search.noise)}"
    side = "below" if runner.value < best.value else "above" if runner.value > best.value else "equal to"
    return f"{abs(best.value - runner.value) / abs(best.value) * 100:.1f} % {side} the best; " \
           f"{_noise_units(search.noise)}"


def _noise_units(noise: Noise | None) -> str:
    if noise is not None and noise.distance is not None:
        return f"{noise.distance:.1f} noise units" + (f" ({noise.verdict})" if noise.verdict else "")
    if noise is None:
        return "noise unknown (the manifest has no noise estimate)"
    return f"noise unknown ({noise.how})" if noise.how else "noise unknown"


def _noise_text(noise: Noise | None, unit: str | None) -> str:
    if noise is None:
        return "- (the manifest has no noise estimate)"
    how = f"; {noise.how}" if noise.how else ""
    lost = f"; {noise.lost} confirmation run(s) gave no trusted value" if noise.lost else ""
    if noise.sigma is None:
        return f"- (sigma unknown{how}){lost}"
    return f"sigma {_value_text(noise.sigma, unit)} from {noise.samples} sample(s){how}{lost}"


def _counts(trials: Sequence[Trial]) -> str:
    counts = [f"{sum(t.state == s for t in trials)} {_STATE_WORDS[s]}" for s in STATES]
    other = sum(t.state not in STATES for t in trials)
    return ", ".join(counts) + (f", {other} in another state" if other else "")


def _line(trial: Trial, unit: str | None) -> TrialLine:
    value = _value_text(trial.value, unit)
    if trial.state == "pruned" and trial.value is None:
        value = f"- (pruned; last live value {_value_text(trial.live, unit)})" if trial.live is not None \
            else "- (pruned; no live value)"
    state = trial.state + (" (filled at random)" if trial.filled else "")
    run = " ".join(x for x in (trial.run_id or "", trial.message) if x) or "-"
    return TrialLine(trial.number, _point_text(trial.point, trial.index), state, value, run)


def _pick_text(pick: Pick, unit: str | None) -> str:
    run = f" (run {pick.run_id})" if pick.run_id else " (run not recorded)"
    return f"{_point_text(pick.point, pick.index)}: {_value_text(pick.value, unit)}{run}"


def _point_text(point: Mapping[str, str], index: int | None) -> str:
    if point:
        return ", ".join(f"{axis}={value}" for axis, value in point.items())
    return f"point {index}" if index is not None else "-"


def _value_text(value: float | None, unit: str | None) -> str:
    return f"{fmt_number(value)} {unit}" if value is not None and unit else fmt_number(value)


def _markers(label: str, points: Sequence[tuple[int, float | None]]) -> plots.Markers:
    """The points that have a value; one without is left out, never drawn as zero."""
    kept = [(x, y) for x, y in points if y is not None]
    return plots.Markers(label, tuple(x for x, _ in kept), tuple(y for _, y in kept))


def _pick(value: Any) -> Pick | None:
    if not isinstance(value, Mapping):
        return None
    return Pick(_int(value.get("index")), _point(value.get("point")), _number(value.get("value")),
                _text(value.get("run_id")))


def _trial(number: int, value: Mapping[str, Any]) -> Trial:
    return Trial(number, _int(value.get("index")), _point(value.get("point")), _text(value.get("state")) or "-",
                 _number(value.get("value")), _number(value.get("live")), _text(value.get("run_id")),
                 value.get("filled") is True, _text(value.get("message")) or "")


def _noise(value: Any) -> Noise | None:
    if not isinstance(value, Mapping):
        return None
    samples = value.get("samples")
    count = sum(len(_list(v)) for v in samples.values()) if isinstance(samples, Mapping) else 0
    sigma = _number(value.get("sigma"))
    return Noise(sigma if sigma is None or sigma >= 0 else None, _number(value.get("distance")), count,
                 _text(value.get("how")) or "", _text(value.get("verdict")) or "", _int(value.get("lost")))


def _number(value: Any) -> float | None:
    """A finite number (a bool, a text or NaN is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _point(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}
