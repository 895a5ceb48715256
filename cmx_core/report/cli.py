"""``cmx results report`` and ``cmx results plot``: argument parsing and writing only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cmx_core.datautil import atomic_write
from cmx_core.errors import UsageError
from cmx_core.report.collect import Selection, collect
from cmx_core.report.html import render
from cmx_core.report.single import single_plot
from cmx_core.results.compare import ACROSS_HELP, across_of
from cmx_core.results.grid import print_fitted


def _selection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", metavar="RUN", nargs="*", help="run ids or prefixes")
    parser.add_argument("--sweep", metavar="ID", help="the points of a `cmx sweep`")
    parser.add_argument("--recipe", metavar="NAME", help="the newest runs of a recipe")
    parser.add_argument("--limit", type=int, default=50, help="with --recipe: how many runs (default 50)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write")


def add_report(sub: Any, leaf: dict[str, Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "report", help="a self-contained HTML page: tables, the comparison and plots", **leaf)
    _selection_args(parser)
    parser.add_argument("--baseline", metavar="RUN",
                        help="the run the comparison is against (default: the earliest unflagged run of the newest "
                             "run's configuration and hardware class)")
    parser.add_argument("--across", metavar="NAME[,NAME]", help=ACROSS_HELP)
    return parser


def add_plot(sub: Any, leaf: dict[str, Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser("plot", help="one metric across runs or a sweep, as a PNG",
                                                     **leaf)
    _selection_args(parser)
    parser.add_argument("--metric", metavar="NAME", help="the metric (default: the primary metric)")
    return parser


def _selection(args: argparse.Namespace) -> Any:
    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    return Selection(tuple(args.runs), args.sweep, args.recipe, args.limit, getattr(args, "baseline", None),
                     across_of(getattr(args, "across", None)))


def _output(args: argparse.Namespace, suffixes: tuple[str, ...]) -> Path:
    path = Path(args.output)
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"-o {path}: the file name must end in {' or '.join(suffixes)}")
    if path.is_dir():
        raise UsageError(f"-o {path}: is a directory; give a file name")
    return path


def cmd_report(args: argparse.Namespace, store: Any) -> int:
    output = _output(args, (".html", ".htm"))
    data = collect(store, _selection(args))
    atomic_write(output, render(data))
    _done(args, {"report": str(output), **data.to_json()}, f"wrote {output} ({len(data.documents)} run(s), "
                                                           f"{len(data.figures)} plot(s))")
    return 0


def cmd_plot(args: argparse.Namespace, store: Any) -> int:
    output = _output(args, (".png",))
    title, png = single_plot(store, _selection(args), args.metric)
    atomic_write(output, png)
    _done(args, {"plot": str(output), "title": title, "bytes": len(png)}, f"wrote {output} ({title})")
    return 0


def _done(args: argparse.Namespace, data: dict[str, Any], message: str) -> None:
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        print_fitted(message, args.wide, file=sys.stderr)
