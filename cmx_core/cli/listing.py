"""Listings that never cut a value or a path: ``--format table|plain|json|csv``.

``table`` is a rich table whose cells fold instead of ending in an ellipsis; ``plain`` is
one line per row, columns padded with two spaces and never truncated (the lines may be
wider than the terminal: a pipe or ``grep`` gets every value whole); ``csv`` and ``json``
are for programs. Without ``--format`` a terminal at least :data:`WIDE` columns wide gets
the table and anything else (a pipe, a narrow terminal) the plain layout.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

FORMATS = ("table", "plain", "json", "csv")
WIDE = 100
"""Columns a terminal needs for the rich table by default."""


@dataclass(frozen=True)
class Listing:
    """A titled grid of cells; ``right`` names the columns aligned right (numbers)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: frozenset[str] = frozenset()


def add_format_option(parser: Any) -> None:
    parser.add_argument("--format", dest="format", choices=FORMATS, default=None,
                        help="table, plain (one line per row, nothing cut), json or csv "
                             "(default: table on a wide terminal, plain otherwise)")


def chosen_format(requested: str | None, json_flag: bool = False, stream: TextIO | None = None) -> str:
    """``--json`` wins; then ``--format``; then table on a wide terminal, plain otherwise."""
    if json_flag:
        return "json"
    if requested is not None:
        return requested
    out = stream or sys.stdout
    wide = shutil.get_terminal_size((80, 24)).columns >= WIDE
    return "table" if out.isatty() and wide else "plain"


def render(listing: Listing, fmt: str, out: TextIO | None = None) -> None:
    """Write ``listing`` to ``out`` (stdout) in ``fmt``."""
    stream = out or sys.stdout
    if fmt == "json":
        rows = [dict(zip(listing.columns, row, strict=True)) for row in listing.rows]
        stream.write(json.dumps({"columns": list(listing.columns), "rows": rows}, indent=2) + "\n")
    elif fmt == "csv":
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(listing.columns)
        writer.writerows(listing.rows)
    elif fmt == "table":
        _table(listing, stream)
    else:
        stream.write(plain(listing))


def plain(listing: Listing) -> str:
    """Padded columns, nothing truncated; the last column is not padded."""
    grid = [listing.columns, *listing.rows]
    widths = [max(len(row[i]) for row in grid) for i in range(len(listing.columns))]
    lines = []
    for row in grid:
        cells = [cell.rjust(w) if name in listing.right else cell.ljust(w)
                 for cell, w, name in zip(row, widths, listing.columns, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _table(listing: Listing, stream: TextIO) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=listing.title)
    for name in listing.columns:
        longest = max((len(row[listing.columns.index(name)]) for row in listing.rows), default=0)
        numeric = name in listing.right
        table.add_column(name, justify="right" if numeric else "left", overflow="fold",
                         min_width=min(longest, 24) if numeric else None, no_wrap=numeric)
    for row in listing.rows:
        table.add_row(*(escape(cell) for cell in row))
    Console(file=stream, highlight=False, soft_wrap=False).print(table)
