"""``cmx sweep``: argument parsing and printing for :mod:`cmx_core.sweep.runner`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cmx_core.cli.recovery_opts import add_recovery_options, chaos_options, recovery, recovery_options
from cmx_core.errors import UsageError
from cmx_core.results.grid import Column, Grid, fit, fit_text, width_for

#: Exit status of a sweep whose points failed: their number, at most this.
MAX_EXIT = 125


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    from cmx_core.cli.core_cmds import _executor_options

    sweep = sub.add_parser(
        "sweep", parents=[common], help="run a recipe over a matrix of inputs, one stored run per point",
        description="Run the recipe selected by --tags once per point of the matrix (the cartesian "
                    "product of the --matrix axes, or with --zip the axes side by side), each point a "
                    "normal run, on any executor (slurm and ray take the points as one batch; the others run "
                    "each point as its own cmx run process). Fixed inputs: --KEY=VALUE. A failed "
                    "point does not stop the others; the exit status is the number of failed points "
                    f"(at most {MAX_EXIT}). `cmx results compare --sweep ID` tabulates the points.")
    sweep.add_argument("noun", nargs="?", choices=["recipe"], help=argparse.SUPPRESS)
    sweep.add_argument("--tags", required=True, help="comma-separated tags; variation names select variations")
    sweep.add_argument("--matrix", action="append", default=[], metavar="KEY=V1,V2",
                       help="an input and its values (repeatable)")
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
    from cmx_core import paths
    from cmx_core.cli.core_cmds import parse_inputs
    from cmx_core.sweep.runner import parse_axes, points, run_sweep

    matrix = points(parse_axes(args.matrix), zipped=args.zip)
    inputs = parse_inputs(args.extra)
    if args.jobs < 1:
        raise UsageError(f"cmx sweep: -j must be at least 1, got {args.jobs}")
    recovery(args)  # a bad --retries or --inject stops the sweep before anything runs
    chaos = chaos_options(args.chaos, len(matrix))
    _plan_every_point(args, inputs, matrix)
    result = run_sweep(args.tags, inputs, matrix, data_dir=paths.data_dir(), run_options=run_options(args),
                       jobs=args.jobs, executor="docker" if args.container else args.executor,
                       on_point=None if args.quiet else _progress, point_options=chaos)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        width = width_for(args.wide)
        sys.stdout.write(fit(points_grid(result.points), width).text())
        print(fit_text(f"sweep {result.sweep_id}: {len(result.points) - result.failed} of {len(result.points)} "
                       f"points ran, {result.failed} failed, {result.wall_s:.1f} s; `cmx results compare --sweep "
                       f"{result.sweep_id}` compares them", width))
    return min(result.failed, MAX_EXIT)


def points_grid(points: Any) -> Grid:
    """One row a point: index, status, its axis values and its run (or why it failed)."""
    columns = (Column("#", right=True, breakable=False), Column("status", breakable=False),
               Column("point"), Column("run or message"))
    rows = tuple((str(p.index), p.status, " ".join(f"{k}={v}" for k, v in p.point.items()),
                  p.run_id or p.message or "-") for p in points)
    return Grid(columns, rows)


def _plan_every_point(args: argparse.Namespace, inputs: dict[str, str], matrix: list[dict[str, str]]) -> None:
    """Resolve and check each point's plan first: a bad input, value or executor setting
    stops the sweep before anything runs (exit 2), naming the point."""
    from cmx_core.cli.core_cmds import parse_executor_options
    from cmx_core.errors import CmxError
    from cmx_core.run import engine

    session = engine.open_session(args.recipes, args.facts)
    options = parse_executor_options(args.executor_opt)
    executor = "docker" if args.container else args.executor
    for index, point in enumerate(matrix):
        try:
            engine.plan(args.tags, {**inputs, **point}, session=session, executor=executor, options=options)
        except CmxError as exc:
            values = " ".join(f"{k}={v}" for k, v in point.items())
            raise UsageError(f"cmx sweep: point {index} ({values}): {exc}") from None


def _progress(point: Any, total: int) -> None:
    values = " ".join(f"{k}={v}" for k, v in point.point.items())
    print(f"cmx sweep: point {point.index + 1}/{total} {values}: {point.status} ({point.wall_s:.1f} s)"
          f"{': ' + point.message if point.failed and point.message else ''}", file=sys.stderr, flush=True)
