"""``cmx sweep --search max:METRIC|min:METRIC`` (#51): the parsing and the report of a search
sweep (:mod:`cmx_core.sweep.search_run`)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from typing import Any

from cmx_core import paths
from cmx_core.cli.core_cmds import parse_inputs
from cmx_core.cli.recovery_opts import recovery
from cmx_core.cli.sweep_view import compare_command, points_grid, progress
from cmx_core.errors import UsageError
from cmx_core.results.grid import fit, fit_text, width_for
from cmx_core.results.numbers import fmt_number
from cmx_core.sweep.runner import SweepRequest, parse_axes, points
from cmx_core.sweep.search_run import SearchRun, resume_search, start_search
from cmx_core.sweep.search_spec import SearchSpec, parse_budget, parse_constraint, parse_objective
from cmx_core.telemetry.appmetrics import check

DEFAULT_SHARE = 0.25
"""Without ``--budget``, a search measures this share of the grid (at least 4 points)."""
DEFAULT_CONFIRM = 2
"""Runs more of the best point and the runner-up: 3 values each, the fewest whose spread says
something of the noise."""
MAX_CONFIRM = 50


def start(args: argparse.Namespace, options: list[str]) -> int:
    """A new search from the command line (``options``: every point's ``cmx run`` options)."""
    if args.zip:
        raise UsageError("cmx sweep --search: the space is the grid of the --matrix axes; drop --zip")
    if args.jobs != 1 or args.chaos:
        raise UsageError("cmx sweep --search runs one point at a time (each choice learns from the last): "
                         "drop -j and --chaos")
    axes = parse_axes(args.matrix)
    matrix = points(axes)
    metric, maximize = parse_objective(args.search)
    runs, seconds = parse_budget(args.budget) if args.budget else (max(4, math.ceil(DEFAULT_SHARE * len(matrix))),
                                                                    None)
    sampler = args.sampler or default_sampler()
    if sampler == "gp" and importlib.util.find_spec("torch") is None:
        raise UsageError("cmx sweep --sampler gp: Optuna's Gaussian-process sampler needs torch, which is not "
                         "installed here: pip install torch, or use the default --sampler tpe")
    confirm = DEFAULT_CONFIRM if args.confirm is None else args.confirm
    if not 0 <= confirm <= MAX_CONFIRM:
        raise UsageError(f"--confirm {confirm}: give 0 to {MAX_CONFIRM} runs more of the best and the runner-up")
    prune = None if args.prune is None else _series_name(args.prune or metric)
    spec = SearchSpec(metric, maximize, tuple(parse_constraint(c) for c in args.constraint), runs, seconds, args.seed,
                      sampler, prune, confirm)
    recovery(args)  # a bad --retries or --inject stops the search before anything runs
    request = SweepRequest(args.tags, parse_inputs(args.extra), matrix, data_dir=paths.data_dir(), run_options=options,
                           executor="docker" if args.container else args.executor, batch=False)
    return report(args, start_search(request, axes, spec, None if args.quiet else progress))


def _series_name(name: str) -> str:
    """The series ``--prune`` watches: an application series' name (docs/telemetry.md)."""
    try:
        check(name, 0.0, "gauge")
    except UsageError:
        raise UsageError(f"--prune {name!r}: a live series is named with letters, digits and _ (not first a digit), "
                         "as its step reports it; give --prune SERIES") from None
    return name


def default_sampler() -> str:
    """``gp`` where torch is installed (cmx's own install has it: fewer runs to the best,
    docs/learning.md), else ``tpe``; the choice is recorded with the search and printed."""
    return "gp" if importlib.util.find_spec("torch") is not None else "tpe"


def resume(args: argparse.Namespace) -> int | None:
    """``--resume ID`` of a search sweep (None: that sweep is a grid sweep)."""
    found = resume_search(args.resume, paths.data_dir(), None if args.quiet else progress)
    return None if found is None else report(args, found)


def report(args: argparse.Namespace, run: SearchRun) -> int:
    """The points table, then the best point, the runner-up and why the search stopped."""
    if args.json:
        print(json.dumps(run.to_json(), indent=2, sort_keys=True))
        return 0
    width = width_for(args.wide)
    print(fit(points_grid(run.result.points), width).text(), end="")
    for line in summary_lines(run):
        print(fit_text(line, width))
    print(f"  {compare_command(run.result.sweep_id)}")  # a line of its own, never wrapped: it is copied
    return 0


def summary_lines(run: SearchRun) -> list[str]:
    search = run.to_json()["search"]
    spec, best, second = run.outcome.spec, search["best"], search["runner_up"]
    goal = f"{'max' if spec.maximize else 'min'} {spec.metric}, {spec.sampler.upper()}"
    filled = (f" ({search['filled_at_random']} drawn at random after the sampler proposed a measured point)"
              if search["filled_at_random"] else "")
    lines = [f"search ({goal}{_constraints(spec)}): {search['measured']} of {search['grid_points']} points "
             f"measured{filled}; stopped: {search['stopped'] or 'asked to'}"]
    if best is None:
        infeasible = len(search["infeasible"])
        lines.append(f"no measured point met the constraints ({infeasible} broke one); nothing is called best")
    else:
        lines.append(f"best: {fmt_number(best['value'])} at {_point(best)} (run {str(best['run_id'])[:8]})")
    if best is not None and search["infeasible"]:
        lines.append(f"broke a constraint (recorded, never the best): points "
                     f"{', '.join('#' + str(i) for i in search['infeasible'])}")
    if best is not None and second is not None:
        gap = abs(best["value"] - second["value"]) / abs(best["value"]) * 100 if best["value"] else 0.0
        lines.append(f"runner-up: {fmt_number(second['value'])} at {_point(second)}, {gap:.1f}% behind; "
                     f"{_noise_text(search['noise'])}")
    pruned = [t for t in search["trials"] if t["state"] == "pruned"]
    if pruned:
        lines.append(f"pruned early (their live {spec.prune} showed them worse than the median; no final value): "
                     f"points {', '.join('#' + str(t['index']) for t in pruned)}")
    elif spec.prune and not any(t.get("live") is not None for t in search["trials"]):
        lines.append(f"--prune: no run reported a live {spec.prune}, so none could be pruned (a step reports it "
                     "with ctx.metrics.report or CMX_METRICS_FILE; docs/telemetry.md)")
    lines.append(f"sweep {run.result.sweep_id}: resume with cmx sweep --resume {run.result.sweep_id}; compare with:")
    return lines


def _noise_text(noise: dict[str, Any] | None) -> str:
    if noise is None:
        return "noise unknown (one run each, --confirm 0)"
    runs = f"{len(noise['samples']['best'])} and {len(noise['samples']['runner_up'])} runs"
    if noise["distance"] is None:
        return f"{noise['verdict']} ({runs})"
    return (f"{noise['distance']:.1f} noise units apart (sigma {fmt_number(noise['sigma'])}, {runs}): "
            f"{noise['verdict']}")


def _constraints(spec: SearchSpec) -> str:
    return f", {', '.join(c.text() for c in spec.constraints)}" if spec.constraints else ""


def _point(trial: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in trial["point"].items())
