"""``cmx run``/``cmx sweep``'s recovery options (docs/faults.md): ``--retries N``,
``--retry-on CLASSES``, ``--retry-backoff DURATION`` and ``--inject FAULT[@WHEN]``; and a
sweep's ``--chaos FILE`` (its ``chaos:`` section: which points get which faults)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.datautil import read_capped
from cmx_core.errors import UsageError
from cmx_core.faults.registry import INJECTORS, parse_injection
from cmx_core.providers.recovery import RETRYABLE, Recovery
from cmx_core.recipes.model import parse_yaml
from cmx_core.recipes.retries import policy_from_options
from cmx_core.recipes.yaml_lines import MAX_FILE_BYTES


def add_recovery_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retries", metavar="N", default=None,
                        help="retry a failed step up to N times (over the recipe's retries:; docs/faults.md)")
    parser.add_argument("--retry-on", metavar="CLASSES", default=None,
                        help=f"the fault classes retried, comma-separated (default all: {','.join(RETRYABLE)})")
    parser.add_argument("--retry-backoff", metavar="DURATION", default=None,
                        help="wait before the first retry (doubled each time), e.g. 5s")
    parser.add_argument("--inject", action="append", default=[], metavar="FAULT[@WHEN]",
                        help=f"inject a fault into each step's first attempt: {', '.join(INJECTORS.kinds)} "
                             "(kill-step@2s, kill-step@50%%, oom@64M, disk-full@64K)")


def recovery(args: argparse.Namespace) -> Recovery:
    """The options as a :class:`Recovery` (a bad value: one line, exit 2)."""
    injections = tuple(parse_injection(text) for text in args.inject)
    return Recovery(policy_from_options(args.retries, args.retry_on, args.retry_backoff), injections)


def recovery_options(args: argparse.Namespace) -> list[str]:
    """The same options for each point's ``cmx run`` of a sweep."""
    options: list[str] = []
    for name in ("retries", "retry_on", "retry_backoff"):
        value = getattr(args, name)
        if value is not None:
            options.append(f"--{name.replace('_', '-')}={value}")
    return options + [f"--inject={text}" for text in args.inject]


CHAOS_KEYS = {"inject", "points"}


def chaos_options(path: str | None, points: int) -> dict[int, list[str]]:
    """A chaos file's ``chaos:`` list as ``--inject`` options per point index::

        chaos:
          - inject: kill-step@1s
            points: [0, 2]      # default: every point
    """
    if path is None:
        return {}
    where = Path(path)
    try:
        data = parse_yaml(read_capped(where, MAX_FILE_BYTES), where)
    except OSError as exc:
        raise UsageError(f"--chaos {path}: cannot read it: {exc.strerror}") from None
    entries = data.get("chaos") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        raise UsageError(f"{path}: chaos: expected a list of {{inject: FAULT[@WHEN], points: [N, ...]}}")
    options: dict[int, list[str]] = {}
    for i, entry in enumerate(entries):
        for index in _chaos_points(path, i, entry, points):
            options.setdefault(index, []).append(f"--inject={entry['inject']}")
    return options


def _chaos_points(path: str, i: int, entry: Any, points: int) -> list[int]:
    if not isinstance(entry, Mapping) or "inject" not in entry or set(entry) - CHAOS_KEYS:
        raise UsageError(f"{path}: chaos.{i}: expected {{inject: FAULT[@WHEN], points: [N, ...]}}")
    try:
        parse_injection(str(entry["inject"]))
    except UsageError as exc:
        raise UsageError(f"{path}: chaos.{i}.inject: {exc}") from None
    chosen = entry.get("points", list(range(points)))
    if not isinstance(chosen, list) or not all(isinstance(p, int) and 0 <= p < points for p in chosen):
        raise UsageError(f"{path}: chaos.{i}.points: expected point indexes from 0 to {points - 1}, got {chosen!r}")
    return list(chosen)
