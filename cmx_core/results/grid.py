"""Tables that fit the terminal: text cells wrap, low-value columns drop, numbers stay whole.

Every table the CLI prints (listings, ``results show``/``compare``, the sweep table, plugin
summaries) goes through :func:`fit`. The width is ``COLUMNS`` (80 when piped and unset); a
cell is wrapped only at spaces unless its column is ``breakable`` (free text, paths), so a
number is never split or shortened. When the narrowest layout still does not fit, the
column with the highest ``drop`` rank goes first and the footer says which went; ``--wide``
(width ``None``) lays every column out at its natural width.

Import-light: it lives beside :mod:`cmx_core.results.numbers` so that the report, the sweep
table and plugins (through :mod:`cmx_core.api`) share it.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass, replace

from cmx_core.errors import escape_controls

GAP = 2
"""Spaces between two columns."""
MIN_TEXT = 12
"""The narrowest a breakable text column is squeezed to before columns are dropped."""
PIPED_WIDTH = 80


@dataclass(frozen=True)
class Column:
    """One column. ``right``: aligned right (numbers). ``breakable``: a word longer than the
    column may be split (free text, paths; never a column holding numbers or ids).
    ``drop``: 0 never dropped; otherwise the highest rank is hidden first when space runs out."""

    name: str
    right: bool = False
    breakable: bool = True
    drop: int = 0


@dataclass(frozen=True)
class Grid:
    """A table: cells are plain text and may hold several lines (``\\n``)."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]
    header: bool = True


@dataclass(frozen=True)
class Fitted:
    """A laid-out grid: its lines and the names of the columns it had to hide."""

    lines: tuple[str, ...]
    hidden: tuple[str, ...]

    def text(self) -> str:
        """The lines, plus a footer naming the hidden columns when any were."""
        lines = [*self.lines, *([hidden_note(self.hidden)] if self.hidden else [])]
        return "".join(f"{line}\n" for line in lines)


def terminal_width() -> int:
    """``COLUMNS`` when set, else the terminal's width, else :data:`PIPED_WIDTH`."""
    return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns


def width_for(wide: bool) -> int | None:
    """The width a table is fitted to: None (natural widths) under ``--wide``."""
    return None if wide else terminal_width()


def hidden_note(hidden: tuple[str, ...]) -> str:
    """``2 columns hidden (task, variant); --wide shows them``, or "" when none were."""
    if not hidden:
        return ""
    count = f"{len(hidden)} column{'s' if len(hidden) > 1 else ''}"
    names = ", ".join(name.split("\n")[0] for name in hidden)
    return f"{count} hidden ({names}); --wide shows {'them' if len(hidden) > 1 else 'it'}"


def fit(grid: Grid, width: int | None, gap: int = GAP, edge: int = 0) -> Fitted:
    """Lay ``grid`` out within ``width`` characters (``gap`` between columns, ``edge`` for a
    border around them); ``None`` keeps every column at its natural width. Cells quote recipes
    and results cmx did not write: each is made safe for the terminal (:func:`escape_controls`)."""
    grid = replace(grid, rows=tuple(tuple(map(escape_controls, row)) for row in grid.rows))
    keep = list(range(len(grid.columns)))
    while width is not None and _overhead(keep, gap, edge) + sum(_narrowest(grid, i) for i in keep) > width:
        victim = _victim(grid, keep)
        if victim is None:
            break  # nothing left that may go: the table runs wide rather than cut a value
        keep.remove(victim)
    widths = _widths(grid, keep, None if width is None else width - _overhead(keep, gap, edge))
    lines = _render(grid, keep, widths, gap)
    hidden = tuple(c.name for i, c in enumerate(grid.columns) if i not in keep)
    return Fitted(tuple(lines), hidden)


def kept_columns(grid: Grid, width: int | None, gap: int = GAP, edge: int = 0) -> tuple[int, ...]:
    """The indexes of the columns :func:`fit` keeps (for renderers with their own borders)."""
    hidden = set(fit(grid, width, gap, edge).hidden)
    return tuple(i for i, c in enumerate(grid.columns) if c.name not in hidden)


def _overhead(keep: list[int], gap: int, edge: int) -> int:
    return gap * max(len(keep) - 1, 0) + edge


def _victim(grid: Grid, keep: list[int]) -> int | None:
    """The kept column of the highest drop rank (the rightmost of equals), or None."""
    ranked = [i for i in keep if grid.columns[i].drop > 0]
    return max(ranked, key=lambda i: (grid.columns[i].drop, i)) if ranked else None


def _cells(grid: Grid, index: int) -> list[str]:
    return [row[index] for row in grid.rows]


def _natural(grid: Grid, index: int) -> int:
    texts = [*_cells(grid, index), grid.columns[index].name if grid.header else ""]
    return max((len(line) for text in texts for line in text.split("\n")), default=0)


def _narrowest(grid: Grid, index: int) -> int:
    """The least width that splits no word of an unbreakable column (its header's included)."""
    column = grid.columns[index]
    if column.breakable:
        return min(_natural(grid, index), MIN_TEXT)
    texts = [*_cells(grid, index), column.name if grid.header else ""]
    return max((len(word) for text in texts for word in text.split()), default=1)


def _widths(grid: Grid, keep: list[int], room: int | None) -> dict[int, int]:
    """Natural widths, then the column with the most room above its floor narrowed one step
    at a time (free text before a column that wraps only at its spaces, on equal room)."""
    widths = {i: _natural(grid, i) for i in keep}
    if room is None:
        return widths
    floor = {i: _narrowest(grid, i) for i in keep}
    while sum(widths.values()) > room:
        squeezable = [i for i in keep if widths[i] > floor[i]]
        if not squeezable:
            break
        widest = max(squeezable, key=lambda i: (widths[i] - floor[i], grid.columns[i].breakable, widths[i]))
        widths[widest] -= 1
    return widths


def _wrap(text: str, width: int, breakable: bool) -> list[str]:
    lines: list[str] = []
    for part in text.split("\n"):
        lines += textwrap.wrap(part, width, break_long_words=breakable, break_on_hyphens=False) or [""]
    return lines


def _render(grid: Grid, keep: list[int], widths: dict[int, int], gap: int) -> list[str]:
    rows: list[tuple[str, ...]] = [tuple(c.name for c in grid.columns)] if grid.header else []
    out: list[str] = []
    for number, row in enumerate([*rows, *grid.rows]):
        is_header = grid.header and number == 0
        wrapped = [_wrap(row[i], widths[i], True if is_header else grid.columns[i].breakable) for i in keep]
        for depth in range(max((len(w) for w in wrapped), default=1)):
            cells = []
            for i, lines in zip(keep, wrapped, strict=True):
                cell = lines[depth] if depth < len(lines) else ""
                cells.append(cell.rjust(widths[i]) if grid.columns[i].right else cell.ljust(widths[i]))
            out.append((" " * gap).join(cells).rstrip())
    return out


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
