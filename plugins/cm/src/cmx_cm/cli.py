"""``cmx import cm DIR [--out DIR] [--report] [--run ALIAS,...]``.

Translates a CM/MLC collection into a recipe directory and writes ``report.json`` (every
key not mapped exactly: file, key, kind, reason). ``--report`` adds the coverage: how many
scripts import (their recipe loads in cmx), plan (``cmx plan`` resolves them on this
machine) and run (for the scripts named by ``--run``, which really run them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cmx_cm.collection import check_duration, import_collection
from cmx_cm.coverage import coverage
from cmx_core.api.display import fit_text, width_for
from cmx_core.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``cmx import cm`` (the word ``cm`` is the command group's: see the
    ``import.cm`` command in :mod:`cmx_cm.plugin`)."""
    parser.add_argument("directory", metavar="DIR", help="the collection (a folder of script folders) or one script")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="where the recipes go (default: ./cmx-cm-recipes); never inside DIR")
    parser.add_argument("--report", action="store_true",
                        help="also count how many scripts import, plan and (with --run) run here")
    parser.add_argument("--cache-detections", metavar="DURATION", default=None,
                        help="cache detect scripts that CM re-runs every time (not cache: true) for DURATION, "
                             "e.g. 1d (default: as CM, never)")
    parser.add_argument("--run", metavar="ALIAS,...", default="",
                        help="with --report: run these scripts for real (aliases or globs like detect-*; "
                             "ALIAS:_VARIATION selects a variation)")


def run(args: argparse.Namespace) -> int:
    if args.run and not args.report:
        raise UsageError("--run needs --report (it counts the scripts that run here)")
    root = Path(args.directory)
    out = Path(args.out) if args.out else Path.cwd() / "cmx-cm-recipes"

    keep = check_duration(args.cache_detections, "--cache-detections") if args.cache_detections else None
    result = import_collection(root, out, cache_detections=keep)
    document: dict[str, Any] = {k: v for k, v in result.report().items() if k != "issues"}
    document["report"] = str(out / "report.json")
    if args.report:
        runs = [p.strip() for p in args.run.split(",") if p.strip()]
        document["coverage"] = coverage(result, out, runs).to_json()
        (out / "coverage.json").write_text(json.dumps(document["coverage"], indent=2) + "\n")
    if getattr(args, "json", False):
        print(json.dumps(document, indent=2))
    else:
        _print(document, width_for(getattr(args, "wide", False)))
    return 0


def _print(document: dict[str, Any], width: int | None) -> None:
    """The import's summary lines, each wrapped at its spaces within ``width``."""
    counts = document["issue_counts"]
    lines = [f"imported {document['imported']} of {document['scripts']} scripts into {document['out_dir']}",
             f"not mapped exactly: {counts['unmapped']} unmapped, {counts['approximated']} approximated, "
             f"{counts['ignored']} ignored (each with file, key and reason in {document['report']})"]
    cov = document.get("coverage")
    if cov:
        lines.append(f"coverage: import {cov['imported']}/{cov['scripts']}, plan {cov['planned']}/{cov['scripts']}, "
                     f"run {cov['ran']}/{cov['run_attempted']} attempted")
        lines += [f"  run {entry['name']}: {entry['status']}" + (f" ({entry['reason']})" if entry["reason"] else "")
                  for entry in cov["runs"]]
    print(fit_text("\n".join(lines), width))
