"""Checks that a command's human output fits the terminal (``COLUMNS``, 80 when piped), for
core and plugin tests alike: no line over the width, no word split, cut cells announced.

A line may run over only when it is kept whole for copying: one word (a path, a value, a
run directory), alone or after a label (``result: /a/b``), or a command line to paste
(``cmx ...``, ``python -m pip ...``); wrapping either would change it."""

from __future__ import annotations

import re

ELLIPSIS = "…"
FOOTER = "--wide shows"
"""What the footer of a fitted table says when it hid a column or cut a cell."""
FOOTER_START = re.compile(r"^(\d+ columns? hidden|cells ending in )")


def over_width(out: str, width: int) -> list[str]:
    """The lines of ``out`` longer than ``width`` that are not one whole word to copy."""
    return [line for line in out.splitlines() if len(line) > width and not _one_word(line)]


def split_words(out: str, wide: str) -> list[str]:
    """The words of ``out`` (the fitted output) that ``wide`` (the same output under
    ``--wide``) does not hold: a word split across lines. A cell cut with an ellipsis and
    the footer's own words are not counted."""
    whole = set(wide.split())
    return [word for line in _without_footers(out) for word in line.split()
            if word not in whole and not word.endswith(ELLIPSIS)]


def _without_footers(out: str) -> list[str]:
    """The lines of ``out`` but a table's footer (its first line and the lines it wraps onto)."""
    kept: list[str] = []
    in_footer = False
    for line in out.splitlines():
        in_footer = bool(FOOTER_START.match(line)) or (in_footer and line.startswith("    "))
        if not in_footer:
            kept.append(line)
    return kept


def fit_problems(out: str, width: int, wide: str | None = None) -> list[str]:
    """Everything wrong with ``out`` as output fitted to ``width``; [] when it fits."""
    problems = [f"{len(line)} columns: {line!r}" for line in over_width(out, width)]
    if wide is not None:
        problems += [f"a word split or changed: {word!r}" for word in split_words(out, wide)]
    if ELLIPSIS in out and FOOTER not in " ".join(out.split()):
        problems.append(f"a cell was cut ({ELLIPSIS}) but no footer says '{FOOTER}'")
    return problems


def assert_fits(out: str, width: int = 80, wide: str | None = None, what: str = "the output") -> None:
    """Fail with every problem :func:`fit_problems` finds in ``out``."""
    problems = fit_problems(out, width, wide)
    assert not problems, f"{what} does not fit {width} columns:\n  " + "\n  ".join(problems[:8])


COMMANDS = ("cmx", "python", "python3", "pip", "docker", "bash")
"""The programs whose command lines cmx prints for copying."""


def _one_word(line: str) -> bool:
    words = line.split()
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    return (len(words) == 1 or (len(words) == 2 and bool(re.fullmatch(r"[\w -]+:", words[0])))
            or program in COMMANDS)
