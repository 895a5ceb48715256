"""``cmx import ale-bench PATH... [--dest DIR] [--vendor DIR]``, also spelt ``cmx ale-bench
import PATH...`` (see :mod:`cmx_alebench.importer`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cmx_core.api import cache_dir
from cmx_core.api.display import fit_text, width_for


def configure(parser: argparse.ArgumentParser) -> None:
    """``cmx ale-bench import PATH...``: the action word, then what ``cmx import ale-bench`` takes."""
    parser.add_argument("action", choices=["import"], help="import: check, build and install problem packages")
    configure_import(parser)


def configure_import(parser: argparse.ArgumentParser) -> None:
    """``cmx import ale-bench PATH...`` (the word ``ale-bench`` is the command group's)."""
    parser.add_argument("paths", metavar="PATH", nargs="+", help="ALE-Bench problem zips or directories")
    parser.add_argument("--dest", metavar="DIR", default=None,
                        help="where the packages go (default: the cmx cache's alebench/problems, which the "
                             "ale-bench recipes search)")
    parser.add_argument("--vendor", metavar="DIR", default=None,
                        help="a 'cargo vendor' folder to build the Rust tools from instead of Debian's "
                             "/usr/share/cargo/registry")


def run(args: argparse.Namespace) -> int:
    from cmx_alebench.importer import import_package  # deferred: start-up: 12 modules not needed to start cmx

    cache = cache_dir()
    dest = Path(args.dest).expanduser() if args.dest else None
    vendor = Path(args.vendor).expanduser() if args.vendor else None
    done = [import_package(Path(p).expanduser(), cache, dest, vendor) for p in args.paths]
    if getattr(args, "json", False):
        print(json.dumps({"imported": [d.to_json() for d in done]}, indent=2))
    else:
        for d in done:
            how = {"python": "python tools", "rust": "Rust tools built" if d.built_now else "Rust tools reused"}
            print(fit_text(f"{d.problem_id}: {how[d.tools]}; installed at {d.dest}",
                           width_for(getattr(args, "wide", False))))
    return 0
