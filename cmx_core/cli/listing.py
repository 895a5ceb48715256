"""Listings, one line per row: ``--format table|plain|json|csv``.

``table`` is a rich table; ``plain`` is columns padded with two spaces. Both fit the
terminal (``COLUMNS``, 80 when piped) by cutting text cells with an ellipsis and hiding the
listing's low-value columns, named in a footer; numbers and ids are never cut
(:mod:`cmx_core.results.grid`). ``--wide`` lays every column out whole (a pipe into
``grep`` then gets every value on its row). ``csv`` and ``json`` are for programs.
Without ``--format`` a terminal at least :data:`WIDE` columns wide gets
the table and anything else (a pipe, a narrow terminal) the plain layout.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from dataclasses import dataclass, replace

from cmx_core.errors import escape_controls
from cmx_core.results.grid import Column, Grid, fit, hidden_note, kept_columns

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

FORMATS = ("table", "plain", "json", "csv")
WIDE = 100
"""Columns a terminal needs for the rich table by default."""


@dataclass(frozen=True)
class Listing:
    """A titled grid of cells; ``right`` names the columns aligned right (numbers), ``whole``
    the other columns that are never cut (ids), and ``drop`` the columns that may be
    hidden on a narrow terminal, the first named going first."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: frozenset[str] = frozenset()
    whole: frozenset[str] = frozenset()
    drop: tuple[str, ...] = ()

    def grid(self) -> Grid:
        ranks = {name: len(self.drop) - i for i, name in enumerate(self.drop)}
        return Grid(tuple(Column(name, right=name in self.right,
                                 whole=name in self.right or name in self.whole,
                                 drop=ranks.get(name, 0)) for name in self.columns), self.rows)


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


def render(listing: Listing, fmt: str, out: TextIO | None = None, width: int | None = None) -> None:
    """Write ``listing`` to ``out`` (stdout) in ``fmt``, fitted to ``width`` (None: ``--wide``)."""
    stream = out or sys.stdout
    if fmt in ("table", "csv"):  # cells quote recipes and results cmx did not write (fit() escapes plain's)
        listing = replace(listing, rows=tuple(tuple(map(escape_controls, row)) for row in listing.rows))
    if fmt == "json":
        rows = [dict(zip(listing.columns, row, strict=True)) for row in listing.rows]
        stream.write(json.dumps({"columns": list(listing.columns), "rows": rows}, indent=2) + "\n")
    elif fmt == "csv":
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(listing.columns)
        writer.writerows(listing.rows)
    elif fmt == "table":
        _table(listing, stream, width)
    else:
        stream.write(plain(listing, width))


def plain(listing: Listing, width: int | None = None) -> str:
    """Padded columns within ``width`` (None: every row on one line); the last column is not padded."""
    return fit(listing.grid(), width).text()


RICH_GAP, RICH_EDGE = 3, 4
"""A rich table's cell padding and rules: three characters between columns, four at the edges."""


def _table(listing: Listing, stream: TextIO, width: int | None) -> None:
    from rich.console import Console  # deferred: rich only when this runs (60 modules)
    from rich.markup import escape  # deferred: rich only when this runs (44 modules)
    from rich.table import Table  # deferred: rich only when this runs (51 modules)

    grid = listing.grid()
    kept = kept_columns(grid, width, RICH_GAP, RICH_EDGE)
    table = Table(title=listing.title)
    for index in kept:
        column = grid.columns[index]
        longest = max((len(row[index]) for row in listing.rows), default=0)
        table.add_column(column.name, justify="right" if column.right else "left", overflow="ellipsis",
                         min_width=longest if column.whole else None, no_wrap=True)
    for row in listing.rows:
        table.add_row(*(escape(row[i]) for i in kept))
    console = Console(file=stream, highlight=False, soft_wrap=False, width=width or 10_000)
    console.print(table)
    hidden = tuple(c.name for i, c in enumerate(grid.columns) if i not in kept)
    if hidden:
        console.print(escape(hidden_note(hidden)))
