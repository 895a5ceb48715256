"""``cmx sweep``: argument parsing and printing for :mod:`cmx_core.sweep.runner`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from cmx_core import paths
from cmx_core.cli import sweep_search_cmd as search_cmd
from cmx_core.cli.core_cmds import _executor_options, parse_executor_options, parse_inputs
from cmx_core.cli.recovery_opts import add_recovery_options, chaos_options, recovery, recovery_options
from cmx_core.cli.sweep_view import compare_command, points_grid, progress
from cmx_core.errors import UsageError
from cmx_core.results.grid import fit, fit_text, width_for
from cmx_core.run.engine import executor_settings
from cmx_core.sweep.batch import Planned, PointOptions, parse_point_options, plan_points
from cmx_core.sweep.runner import SweepRequest, SweepResult, parse_axes, points, resume_sweep, run_sweep
from cmx_core.sweep.search_spec import SAMPLERS
from cmx_core.sweep.state import SweepSpec

#: The ``cmx run`` options of a recovery policy, as :func:`recovery_options` writes them.
RECOVERY_FLAGS = ("--retries=", "--retry-on=", "--retry-backoff=", "--inject=")

#: Exit status of a sweep whose points failed: their number, at most this.
MAX_EXIT = 125


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    sweep = sub.add_parser(
        "sweep", parents=[common], help="run a recipe over a matrix of inputs, one stored run per point",
        description="Run the recipe selected by --tags once per point of the matrix (the cartesian "
                    "product of the --matrix axes, or with --zip the axes side by side), each point a "
                    "normal run, on any executor (slurm, ray and k8s take the points as one batch; the others run "
                    "each point as its own cmx run process). --resume SWEEP_ID runs only the points of "
                    "an earlier sweep that have no successful result. Fixed inputs: --KEY=VALUE. A failed "
                    "point does not stop the others; the exit status is the number of failed points "
                    f"(at most {MAX_EXIT}). `cmx results compare --sweep ID` tabulates the points.")
    sweep.add_argument("noun", nargs="?", choices=["recipe"], help=argparse.SUPPRESS)
    sweep.add_argument("--tags", help="comma-separated tags; variation names select variations")
    sweep.add_argument("--resume", metavar="SWEEP_ID",
                       help="run only the points of that sweep that have no successful result (its own tags, "
                            "matrix and options)")
    sweep.add_argument("--matrix", action="append", default=[], metavar="KEY=V1,V2",
                       help="an input and its values (repeatable), or a range: KEY=LO..HI, KEY=LO..HI/STEP, "
                            "KEY=LO..HI*FACTOR (e.g. batch=1..256*2)")
    sweep.add_argument("--search", metavar="max:METRIC|min:METRIC",
                       help="choose each next point with Optuna (see --sampler) instead of running the whole grid")
    sweep.add_argument("--constraint", action="append", default=[], metavar="METRIC<=X|METRIC>=X",
                       help="with --search: a bound another metric must meet (repeatable)")
    sweep.add_argument("--budget", metavar="RUNS|DURATION",
                       help="with --search: how many runs (e.g. 12) or how long (e.g. 10m) (default: 25%% of the grid)")
    sweep.add_argument("--seed", type=int, default=0, help="with --search: the sampler's seed (default 0)")
    sweep.add_argument("--sampler", choices=SAMPLERS, default=None,
                       help="with --search: Optuna's Gaussian-process sampler (gp, the default where torch is "
                            "installed) or TPE (tpe, the default elsewhere)")
    sweep.add_argument("--prune", nargs="?", const="", default=None, metavar="SERIES",
                       help="with --search: stop a point early when its live series (the objective's name, or "
                            "SERIES, as its step reports it) is worse than the median of the points before it")
    sweep.add_argument("--confirm", type=int, default=None, metavar="N",
                       help="with --search: run the best point and the runner-up N times more once the budget is "
                            "spent, to tell their gap from the noise (default 2; 0: none)")
    sweep.add_argument("--zip", action="store_true", help="take the axes side by side instead of their product")
    sweep.add_argument("-j", "--jobs", type=int, default=1, help="points to run at once")
    sweep.add_argument("--facts", metavar="FILE", help="use a saved facts file instead of probing this machine")
    sweep.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    _executor_options(sweep)
    add_recovery_options(sweep)
    sweep.add_argument("--chaos", metavar="FILE", default=None,
                       help="a YAML file whose chaos: section says which points get which --inject faults")
    sweep.set_defaults(handler=cmd_sweep, accepts_inputs=True)


def run_options(args: argparse.Namespace) -> list[str]:
    """The options every point's ``cmx run`` gets from the sweep's command line."""
    options: list[str] = []
    for directory in args.recipes:
        options += ["--recipes", directory]
    if args.facts:
        options += ["--facts", args.facts]
    if args.no_cache:
        options.append("--no-cache")
    if args.container:
        options.append("--container")
    if args.executor:
        options += ["--executor", args.executor]
    for pair in args.executor_opt:
        options += ["--executor-opt", pair]
    return options + recovery_options(args)


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.resume:
        return _resume(args)
    if not args.tags:
        raise UsageError("cmx sweep: give --tags=... (or --resume SWEEP_ID to finish a sweep)")
    if args.search is None and (args.constraint or args.budget or args.seed or args.sampler
                                or args.prune is not None or args.confirm is not None):
        raise UsageError("cmx sweep: --constraint, --budget, --seed, --sampler, --prune and --confirm go with "
                         "--search max:METRIC|min:METRIC")
    if args.search is not None:
        return search_cmd.start(args, run_options(args))
    matrix = points(parse_axes(args.matrix), zipped=args.zip)
    inputs = parse_inputs(args.extra)
    if args.jobs < 1:
        raise UsageError(f"cmx sweep: -j must be at least 1, got {args.jobs}")
    recovery(args)  # a bad --retries or --inject stops the sweep before anything runs
    chaos = chaos_options(args.chaos, len(matrix))
    executor = "docker" if args.container else args.executor
    options = run_options(args)
    planned = plan_points(args.tags, inputs, matrix, range(len(matrix)), _point_options(options), executor)
    if _renders(args, executor, planned):
        return 0
    result = run_sweep(SweepRequest(args.tags, inputs, matrix, data_dir=paths.data_dir(), run_options=options,
                                    jobs=args.jobs, executor=executor, point_options=chaos),
                       on_point=None if args.quiet else progress, planned=planned)
    return _report(args, result)


def _resume(args: argparse.Namespace) -> int:
    """``--resume ID``: the sweep's own definition; anything else given is refused."""
    given = [flag for flag, value in (("--tags", args.tags), ("--matrix", args.matrix), ("--zip", args.zip),
                                      ("inputs", args.extra), ("--executor", args.executor),
                                      ("--executor-opt", args.executor_opt), ("--container", args.container),
                                      ("--recipes", args.recipes), ("--facts", args.facts),
                                      ("--no-cache", args.no_cache), ("-j", args.jobs != 1),
                                      ("--chaos", args.chaos), ("--inject", args.inject)) if value]
    given += [flag for flag, value in (("--search", args.search), ("--constraint", args.constraint),
                                       ("--budget", args.budget), ("--seed", args.seed),
                                       ("--sampler", args.sampler)) if value]
    if given:
        raise UsageError(f"cmx sweep --resume: {', '.join(given)} cannot be changed; the sweep resumes as it "
                         "was defined (start a new sweep to change it)")
    searched = search_cmd.resume(args)
    if searched is not None:
        return searched

    def check(spec: SweepSpec, indices: Sequence[int]) -> Planned:
        return plan_points(spec.tags, spec.base_inputs, spec.matrix, indices, _point_options(spec.run_options),
                           spec.executor)

    result = resume_sweep(args.resume, data_dir=paths.data_dir(), on_point=None if args.quiet else progress,
                          plan=check)
    return _report(args, result)


def _point_options(options: Sequence[str]) -> PointOptions:
    """The options that planning a point needs (the recovery ones matter only when it runs)."""
    parsed = parse_point_options([o for o in options if not o.startswith(RECOVERY_FLAGS)])
    assert parsed is not None, "run_options() gives only options the batch path knows"
    return parsed


def _renders(args: argparse.Namespace, executor: str | None, planned: Planned) -> bool:
    """``--executor-opt render=DIR`` on an executor that renders a sweep (k8s): every point's
    manifests written there, nothing applied or recorded."""
    chosen = planned.session.registry.executors.get(executor or "")
    if chosen is None or chosen.render_many is None or not parse_executor_options(args.executor_opt).get("render"):
        return False
    settings = executor_settings(chosen, parse_executor_options(args.executor_opt))
    written = chosen.render_many(planned.contexts(settings), args.jobs)
    if args.json:
        print(json.dumps({"rendered": [str(p) for p in written], "points": len(planned.plans)}, indent=2))
    else:
        print(f"cmx sweep: rendered {len(planned.plans)} points' manifests ({len(written)} files) into "
              f"{parse_executor_options(args.executor_opt)['render']}; nothing was applied")
    return True


def _report(args: argparse.Namespace, result: SweepResult) -> int:
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        width = width_for(args.wide)
        sys.stdout.write(fit(points_grid(result.points), width).text())
        print(fit_text(f"sweep {result.sweep_id}: {len(result.points) - result.failed} of {len(result.points)} "
                       f"points ran, {result.failed} failed, {result.wall_s:.1f} s; compare them with:", width))
        print(f"  {compare_command(result.sweep_id)}")  # a line of its own, never wrapped: it is copied
    return min(result.failed, MAX_EXIT)
