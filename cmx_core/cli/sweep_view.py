"""What ``cmx sweep`` prints, grid or search: the table of points, the progress line of each
point as it ends (stderr), and the command that compares the points."""

from __future__ import annotations

import shlex
import sys
from typing import Any

from cmx_core.results.grid import Column, Grid


def compare_command(sweep_id: str) -> str:
    return f"cmx results compare --sweep {shlex.quote(sweep_id)}"


def points_grid(points: Any) -> Grid:
    """One row a point: index, status, its axis values and its run (or why it failed)."""
    columns = (Column("#", right=True, whole=True), Column("status", whole=True),
               Column("point"), Column("run or message"))
    rows = tuple((str(p.index), p.status, " ".join(f"{k}={v}" for k, v in p.point.items()),
                  p.run_id or p.message or "-") for p in points)
    return Grid(columns, rows)


def progress(point: Any, total: int) -> None:
    values = " ".join(f"{k}={v}" for k, v in point.point.items())
    print(f"cmx sweep: point {point.index + 1}/{total} {values}: {point.status} ({point.wall_s:.1f} s)"
          f"{': ' + point.message if point.failed and point.message else ''}", file=sys.stderr, flush=True)
    for warning in point.warnings:
        print(f"  warning: {warning}", file=sys.stderr, flush=True)
