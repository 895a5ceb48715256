"""``cmx system check``: the machine's interference sources for benchmarking (the logic is
in :mod:`cmx_core.conditions.check`; docs/busy-machine.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cmx_core.conditions.check import Source, report_json, system_check
from cmx_core.errors import UsageError
from cmx_core.results.grid import Column, Grid, fit, print_fitted, width_for


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    system = sub.add_parser("system", parents=[common], help="check this machine for benchmarking")
    actions = system.add_subparsers(dest="action", metavar="ACTION", parser_class=type(system), required=True)
    check = actions.add_parser("check", parents=[common],
                               help="every interference source, whether it is fine, and the command that fixes it")
    check.add_argument("--root", default="/", metavar="DIR",
                       help="read a recorded sysfs/procfs tree below DIR instead of this machine (default /)")
    check.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Print the sources (exit 0: a report, not a gate; ``fine`` says what to fix)."""
    root = Path(args.root)
    if not root.is_dir():
        raise UsageError(f"--root {args.root}: not a directory")
    sources = system_check(root, os.environ)
    if args.json:
        print(json.dumps(report_json(root, sources), indent=2))
        return 0
    grid = Grid((Column("source", whole=True), Column("state"), Column("fine", whole=True),
                 Column("fix")), tuple(_row(s) for s in sources))
    sys.stdout.write(fit(grid, width_for(args.wide)).text())
    bad = sum(1 for s in sources if s.fine is False)
    print_fitted(f"{len(sources)} sources, {bad} not fine for benchmarking" + (": run the fixes above" if bad else ""),
                 args.wide)
    return 0


def _row(source: Source) -> tuple[str, str, str, str]:
    fine = {True: "ok", False: "NO", None: "-"}[source.fine]
    return source.name, source.state, fine, source.fix
