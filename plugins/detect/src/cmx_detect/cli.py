"""``cmx detect [--json] [--replay FIXTURE | --record DIR] [--only NAME,...] [--refresh]``.

``--json`` prints exactly one document, ``{"facts": {...}, "errors": {...}, "source": ...}``,
which ``cmx plan/run --facts FILE`` reads back. ``--replay`` runs the same detectors on a
recorded fixture (a directory with ``fixture.json``, that file, or a bundled fixture name such
as ``h100-sxm-8x``) instead of this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.api import Detector, FactStore
from cmx_core.api.display import Column, Grid, fit, fit_text, width_for
from cmx_core.errors import UsageError
from cmx_detect.cuda import check_override
from cmx_detect.detectors import NAMES, run_all, select
from cmx_detect.record import RecordingSource
from cmx_detect.replay import FixtureSource, resolve_fixture
from cmx_detect.summary import summarise
from cmx_detect.tags import parse_override


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replay", metavar="FIXTURE",
                        help="detect from a recorded fixture (directory, its fixture.json, or a bundled name)")
    parser.add_argument("--only", metavar="NAME,...", default="",
                        help="only these detectors "
                             "(os,cpu,memory,python,cuda,gpus,accelerator,torch,container_engines)")
    parser.add_argument("--refresh", action="store_true", help="ignore cached facts and probe again")
    parser.add_argument("--record", metavar="DIR",
                        help="probe this machine and save every raw answer as a fixture in DIR (for --replay)")
    if not any("--json" in a.option_strings for a in parser._actions):
        parser.add_argument("--json", action="store_true", help="print one JSON document")


def collect(replay: str | None, only: list[str], refresh: bool = False, record: str | None = None,
            detectors: Mapping[str, Detector] | None = None) -> tuple[dict[str, Any], dict[str, str], str]:
    """Facts, errors and the source name, from a fixture or from this machine (through
    ``detectors``, every loaded plugin's: the command's registry hands them over)."""
    select(only)  # validates --only names early
    if record:
        return _record(record, replay, only)
    if replay:
        src = FixtureSource(resolve_fixture(replay))
        facts, errors = run_all(src, only)
        return facts, errors, src.name
    facts, errors = _live(only, refresh, detectors or {})
    return facts, errors, "live"


def _record(directory: str, replay: str | None, only: list[str]) -> tuple[dict[str, Any], dict[str, str], str]:
    if replay:
        raise UsageError("--record and --replay exclude each other: record this machine, or replay a fixture")
    target = Path(directory)
    if target.exists() and any(target.iterdir()):
        raise UsageError(f"--record {directory}: directory is not empty; give a new or empty directory")
    _check_overrides()
    src = RecordingSource()
    facts, errors = run_all(src, only)
    src.save(target)
    return facts, errors, f"live (recorded to {target})"


def _live(only: list[str], refresh: bool,
          detectors: Mapping[str, Detector]) -> tuple[dict[str, Any], dict[str, str]]:
    """This machine through cmx-core's fact store (cached, fingerprinted), so ``cmx detect``
    sees every plugin's ``detectors``."""
    detectors = dict(detectors)
    _check_overrides()
    store = FactStore(detectors, use_cache=not refresh)
    names = only or [*NAMES, *sorted(set(detectors) - set(NAMES))]
    facts = {name: store.try_get(name) for name in names}
    return facts, dict(store.errors)


def _check_overrides() -> None:
    """Bad ``CMX_OVERRIDE_*`` values are usage errors (exit 2), not detector failures."""
    if os.environ.get("CMX_OVERRIDE_ACCELERATOR") is not None:
        parse_override(os.environ["CMX_OVERRIDE_ACCELERATOR"])
    if os.environ.get("CMX_OVERRIDE_CUDA") is not None:
        check_override(os.environ["CMX_OVERRIDE_CUDA"])


def run(ns: argparse.Namespace) -> int:
    only = [n.strip() for n in (ns.only or "").split(",") if n.strip()]
    facts, errors, source = collect(ns.replay, only, getattr(ns, "refresh", False), getattr(ns, "record", None),
                                    ns.cmx_registry.detectors)
    if getattr(ns, "json", False):
        json.dump({"facts": facts, "errors": errors, "source": source}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(render(facts, source, width_for(getattr(ns, "wide", False))))
    for name, message in errors.items():
        print(f"cmx detect: warning: detector '{name}' failed: {message}", file=sys.stderr)
    return 0


def render(facts: dict[str, Any], source: str, width: int | None = None) -> str:
    """A short human summary, one row per fact, fitted to ``width`` (None: one line each)."""
    grid = Grid((Column("fact", whole=True), Column("summary")),
                tuple((name, summarise(name, value)) for name, value in facts.items()), header=False)
    return fit_text(f"facts from: {source}", width) + "\n" + fit(grid, width).text().rstrip("\n")
