"""``cmx run --runs N``: the run repeated, each a stored run, and each metric's statistics
over the repeats (:mod:`cmx_core.results.repeats`: mean, median, CI, CV, outliers)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from cmx_core.errors import UsageError
from cmx_core.results.grid import fit_text, width_for
from cmx_core.results.summary import run_summary, wrapped


def check_runs(args: argparse.Namespace) -> None:
    """``--runs`` is 1 or more, and not with what repeats or hands a run its plan itself."""
    if args.runs < 1:
        raise UsageError(f"--runs {args.runs}: give 1 or more runs")
    if args.runs > 1 and (args.soak is not None or args.plan_on_stdin or args.sweep_point):
        raise UsageError("--runs repeats a whole run: not with --soak (which repeats the step) or a sweep point")


def run_repeats(args: argparse.Namespace, first: Any, again: Callable[[], Any]) -> int:
    """Run ``args.runs - 1`` more times after ``first``; print each run's summary as it ends
    (or one JSON document at the end), then the statistics."""
    results = [first]
    _show(args, first, 1)
    for index in range(2, args.runs + 1):
        results.append(again())
        _show(args, results[-1], index)
    documents = [r.document for r in results]
    from cmx_core.results.repeats import repeat_stats  # deferred: start-up: statistics, for --runs 2 or more

    stats = repeat_stats(documents)
    warnings = [w for w in (s.warning() for s in stats) if w]
    if args.json:
        sys.stdout.write(json.dumps({"runs": documents, "repeats": [s.to_json() for s in stats],
                                     "warnings": warnings}, indent=2, default=str) + "\n")
        return 0
    print(f"repeats: {len(results)} runs")
    for item in stats:
        print(fit_text(item.text(), width_for(args.wide)))
    for warning in warnings:
        print("\n".join(wrapped(f"warning: {warning}", "  ", "    ", width_for(args.wide))))
    print(f"result: {results[-1].result_path}")  # the last line stays the last run's result
    return 0


def _show(args: argparse.Namespace, result: Any, index: int) -> None:
    if not args.json:
        summary = run_summary(result.document, result.result_path, width_for(args.wide))
        print(f"run {index} of {args.runs}:\n{summary}", flush=True)
