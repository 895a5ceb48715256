"""Tables that fit the terminal the way ``ls``, ``git`` and ``kubectl`` do: one line per row.

Every table the CLI prints (listings, ``results show``/``compare``, the sweep table, plugin
summaries) goes through :func:`fit`. The width is ``COLUMNS`` (80 when piped and unset). A
text cell longer than its column is cut and ends in ``…`` (:data:`ELLIPSIS`); a column marked
``whole`` (numbers, ids, keys) is never cut, so a number is never split or shortened. When
the narrowest layout still does not fit, the column with the highest ``drop`` rank goes
first. The footer says which columns went and that cut cells show whole with ``--wide``
(width ``None``: every column at its natural width, nothing cut) or with the command's
``show``.

Import-light: it lives beside :mod:`cmx_core.results.numbers` so that the report, the sweep
table and plugins (through :mod:`cmx_core.api`) share it.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass, replace

from cmx_core.errors import escape_controls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

GAP = 2
"""Spaces between two columns."""
MIN_TEXT = 12
"""The narrowest a text column is squeezed to (then cut) when nothing is left to drop."""
KEEP_TEXT = 32
"""What a text column that is never dropped gets (up to its natural width) before a
low-value column is shown beside it: a recipe's name is worth more than its inputs."""
PIPED_WIDTH = 80
ELLIPSIS = "…"
"""The last character of a cut cell."""


@dataclass(frozen=True)
class Column:
    """One column. ``right``: aligned right (numbers). ``whole``: never cut (numbers, ids,
    keys); a text column is cut with an ellipsis when the row would not fit.
    ``drop``: 0 never dropped; otherwise the highest rank is hidden first when space runs out."""

    name: str
    right: bool = False
    whole: bool = False
    drop: int = 0


@dataclass(frozen=True)
class Grid:
    """A table of plain-text cells, one line each (a line break in a body cell reads as a
    space). A header cell may hold several lines (``\\n``): a header row of several lines."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]
    header: bool = True


@dataclass(frozen=True)
class Fitted:
    """A laid-out grid: its lines, the names of the columns it had to hide, and whether any
    cell was cut."""

    lines: tuple[str, ...]
    hidden: tuple[str, ...]
    cut: bool = False
    width: int | None = None

    def text(self) -> str:
        """The lines, plus a footer naming the hidden columns and saying cells were cut
        (wrapped at its spaces within the width)."""
        note = footer(self.hidden, self.cut)
        return "".join(f"{line}\n" for line in [*self.lines, *([fit_text(note, self.width)] if note else [])])


def terminal_width() -> int:
    """``COLUMNS`` when set, else the terminal's width, else :data:`PIPED_WIDTH`."""
    return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns


def width_for(wide: bool) -> int | None:
    """The width a table is fitted to: None (natural widths) under ``--wide``."""
    return None if wide else terminal_width()


def hidden_note(hidden: tuple[str, ...]) -> str:
    """``2 columns hidden (task, variant); --wide shows them``, or "" when none were."""
    return footer(hidden, False)


def footer(hidden: tuple[str, ...], cut: bool) -> str:
    """What a fitted table left out: hidden columns by name, cut cells; "" when nothing."""
    parts = []
    if hidden:
        names = ", ".join(name.split("\n")[0] for name in hidden)
        parts.append(f"{len(hidden)} column{'s' if len(hidden) > 1 else ''} hidden ({names})")
    if cut:
        parts.append(f"cells ending in {ELLIPSIS} are cut")
    if not parts:
        return ""
    return f"{'; '.join(parts)}; --wide shows {'them' if len(hidden) > 1 or cut else 'it'}"


def fit(grid: Grid, width: int | None, gap: int = GAP, edge: int = 0) -> Fitted:
    """Lay ``grid`` out within ``width`` characters (``gap`` between columns, ``edge`` for a
    border around them); ``None`` keeps every column at its natural width. Cells quote recipes
    and results cmx did not write: each is made safe for the terminal (:func:`escape_controls`)."""
    grid = _one_line_cells(grid)
    keep = list(range(len(grid.columns)))
    while width is not None and _overhead(keep, gap, edge) + sum(_wanted(grid, i) for i in keep) > width:
        victim = _victim(grid, keep)
        if victim is None:
            break  # nothing left that may go: the table runs wide rather than cut a value
        keep.remove(victim)
    widths = _widths(grid, keep, None if width is None else width - _overhead(keep, gap, edge))
    lines, cut = _render(grid, keep, widths, gap)
    hidden = tuple(c.name for i, c in enumerate(grid.columns) if i not in keep)
    return Fitted(tuple(lines), hidden, cut, width)


def kept_columns(grid: Grid, width: int | None, gap: int = GAP, edge: int = 0) -> tuple[int, ...]:
    """The indexes of the columns :func:`fit` keeps (for renderers with their own borders)."""
    hidden = set(fit(grid, width, gap, edge).hidden)
    return tuple(i for i, c in enumerate(grid.columns) if c.name not in hidden)


def cut_to(text: str, width: int) -> str:
    """``text`` within ``width`` characters: whole, or cut and ending in :data:`ELLIPSIS`."""
    return text if len(text) <= width else text[: max(width - 1, 0)].rstrip() + ELLIPSIS


def _one_line_cells(grid: Grid) -> Grid:
    """Body cells made safe for the terminal and put on one line."""
    rows = tuple(tuple(" ".join(escape_controls(cell).split("\n")) for cell in row) for row in grid.rows)
    return replace(grid, rows=rows)


def _overhead(keep: list[int], gap: int, edge: int) -> int:
    return gap * max(len(keep) - 1, 0) + edge


def _victim(grid: Grid, keep: list[int]) -> int | None:
    """The kept column of the highest drop rank (the rightmost of equals), or None."""
    ranked = [i for i in keep if grid.columns[i].drop > 0]
    return max(ranked, key=lambda i: (grid.columns[i].drop, i)) if ranked else None


def _header_lines(grid: Grid, index: int) -> list[str]:
    return grid.columns[index].name.split("\n") if grid.header else []


def _natural(grid: Grid, index: int) -> int:
    texts = [*(row[index] for row in grid.rows), *_header_lines(grid, index)]
    return max(map(len, texts), default=0)


def _narrowest(grid: Grid, index: int) -> int:
    """The least width of a column: a whole column's widest cell (its header's words
    included); a text column's natural width up to :data:`MIN_TEXT`."""
    if not grid.columns[index].whole:
        return min(_natural(grid, index), MIN_TEXT)
    words = [word for line in _header_lines(grid, index) for word in line.split()]
    return max([*(len(row[index]) for row in grid.rows), *map(len, words)], default=1)


def _wanted(grid: Grid, index: int) -> int:
    """The width a column claims before low-value columns are dropped for it: a text column
    that is never dropped up to :data:`KEEP_TEXT`; any other its narrowest."""
    column = grid.columns[index]
    if column.whole or column.drop:
        return _narrowest(grid, index)
    return min(_natural(grid, index), max(KEEP_TEXT, _narrowest(grid, index)))


def _widths(grid: Grid, keep: list[int], room: int | None) -> dict[int, int]:
    """Natural widths, then the column with the most room above its floor narrowed one step
    at a time: a low-value column (one that may be dropped) first, then the others; a text
    column before a header that would wrap, on equal room."""
    widths = {i: _natural(grid, i) for i in keep}
    if room is None:
        return widths
    floor = {i: _narrowest(grid, i) for i in keep}
    while sum(widths.values()) > room:
        squeezable = [i for i in keep if widths[i] > floor[i]]
        if not squeezable:
            break
        widest = max(squeezable, key=lambda i: (grid.columns[i].drop > 0, widths[i] - floor[i],
                                                not grid.columns[i].whole, widths[i]))
        widths[widest] -= 1
    return widths


def _header_rows(grid: Grid, keep: list[int], widths: dict[int, int]) -> list[list[str]]:
    """The header's lines: a header line wider than a whole column wraps at its spaces; a
    text column's header is cut like its cells."""
    cells = []
    for i in keep:
        lines: list[str] = []
        for line in _header_lines(grid, i):
            if grid.columns[i].whole:
                lines += textwrap.wrap(line, widths[i], break_long_words=False, break_on_hyphens=False) or [""]
            else:
                lines.append(cut_to(line, widths[i]))
        cells.append(lines)
    depth = max((len(lines) for lines in cells), default=0)
    return [[lines[d] if d < len(lines) else "" for lines in cells] for d in range(depth)]


def _render(grid: Grid, keep: list[int], widths: dict[int, int], gap: int) -> tuple[list[str], bool]:
    """The header's lines then one line a row, and whether a cell was cut."""
    out: list[list[str]] = _header_rows(grid, keep, widths) if grid.header else []
    cut = False
    for row in grid.rows:
        cells = [cut_to(row[i], widths[i]) for i in keep]
        cut = cut or any(cell != row[i] for cell, i in zip(cells, keep, strict=True))
        out.append(cells)
    lines = []
    for cells in out:
        padded = [cell.rjust(widths[i]) if grid.columns[i].right else cell.ljust(widths[i])
                  for cell, i in zip(cells, keep, strict=True)]
        lines.append((" " * gap).join(padded).rstrip())
    return lines, cut


def print_fitted(text: str, wide: bool, file: TextIO | None = None) -> None:
    """Print a human line (or lines) of a command fitted to the terminal (:func:`fit_text`),
    whole under ``--wide``."""
    print(fit_text(text, width_for(wide)), file=file)


def fit_text(text: str, width: int | None, indent: int = 4) -> str:
    """Free-form report lines within ``width``: a long line wraps at its spaces onto lines
    indented ``indent`` deeper than it. No word is split: a path longer than the width gets
    a line of its own, whole, for copying."""
    if width is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(line.lstrip(" "), width, initial_indent=lead, subsequent_indent=lead + " " * indent,
                             break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join(out)
