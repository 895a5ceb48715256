"""Output that fits (#33 item 3): every table command, piped at 80 columns, prints no line
over 80 and never cuts a number (each value the results hold is printed whole, in the one
shared format); the hidden columns are named; ``--wide`` shows everything.

The measured values are planted (a shell step prints them), so they are exact and large
enough to need thousands separators; nothing depends on the machine's speed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from cmx_core.report.html import fmt
from cmx_core.results.grid import ELLIPSIS, Column, Grid, fit, fit_text, hidden_note
from cmx_core.results.numbers import fmt_number
from cmx_core.results.sweep_table import SweepRow, SweepTable
from cmx_core.testing.fits import assert_fits

WIDTH = 80
VALUES = (1523751.73, 998877.5, 31415926.25, 2718281.5)
RECIPE = """
name: planted-throughput
version: "1.0"
tags: [planted, throughput]
summary: a throughput and a latency read from the recipe's inputs, a stand-in for a measurement whose summary is long
inputs:
  rate: {type: number, default: 1, description: the throughput to report}
  label: {type: string, default: "a-rather-long-input-value-that-would-widen-the-inputs-column-a-lot"}
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["printf", "RATE=%s\\nLATENCY=0.000123456\\n", "{{ inputs.rate }}"]
      metrics:
        tokens_per_second: {kv: RATE, unit: tokens/s, higher_is_better: true}
        latency_s: {kv: LATENCY, unit: s, higher_is_better: false}
"""
NUMBER = re.compile(r"(?<![\w.,])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w,]|\.\d)")


@pytest.fixture
def world(cli: Callable[..., Any], recipes: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Four planted runs (the first bundled), a demo-sort run (a cache entry) and a two-point
    sweep, at 80 columns."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    recipes("planted", RECIPE)
    runs = []
    for value in VALUES:
        done = cli("run", "recipe", "--tags=planted,throughput", "--recipes", recipes.dir, f"--rate={value}", "--json")
        assert done.code == 0, done.err
        runs.append(json.loads(done.out)["run_id"])
    cached = cli("run", "recipe", "--tags=demo,sort", "--size=1000", "--repeats=1", "--json")
    assert cached.code == 0, cached.err  # its data set is a cache entry for `cache list`
    sweep = cli("sweep", "--tags=planted,throughput", "--recipes", recipes.dir, "--matrix",
                f"rate={VALUES[0]},{VALUES[2]}", "--json")
    assert sweep.code == 0, sweep.err
    bundle = recipes.dir.parent / "planted.tar.gz"
    made = cli("bundle", "create", runs[0], "-o", bundle)
    assert made.code == 0, made.err
    return {"runs": runs, "sweep": json.loads(sweep.out)["sweep_id"], "dir": str(recipes.dir), "bundle": str(bundle)}


def _fits(out: str, width: int = WIDTH) -> None:
    """No line over ``width`` (but a whole word to copy), a cut cell announced, no number cut."""
    assert_fits(out, width)
    cut = [word for word in out.split() if word.endswith(ELLIPSIS) and re.match(r"-?\d", word)]
    assert not cut, f"a number was cut: {cut}"
    # The shared format writes only magnitudes below 1e-4 in e-notation (4 significant digits,
    # e.g. a wall-time difference of 9.5e-05 s); a larger one in it was shortened to fit.
    # whole numbers only: a run id such as e17a537e-1b68 holds "7e-1"
    shortened = [m for m in re.findall(r"(?<![\w.-])-?\d(?:\.\d+)?e[-+]\d+(?![\w.-])", out)
                 if abs(float(m)) >= 1e-4]
    assert not shortened, f"a number was shortened: {shortened}"


def _whole(value: float, out: str) -> None:
    """``value``, in the shared format, appears as a whole number token of ``out``."""
    shown = fmt_number(value)
    assert shown in NUMBER.findall(out), f"{shown} is not printed whole in:\n{out}"


def _table_commands(world: dict[str, Any]) -> list[tuple[str, ...]]:
    first, *_ = world["runs"]
    return [
        ("list", "recipes", "--recipes", world["dir"]),
        ("results", "list"),
        ("results", "show", first),
        ("results", "compare", *world["runs"]),
        ("results", "compare", "--sweep", world["sweep"]),
        ("plugins", "list"),
        ("plugins", "search", "a"),
        ("plugins", "info", "cmx-docker"),
        ("cache", "list"),
        ("cache", "verify"),
        ("registry", "check"),
        ("detect", "--replay", "h100-sxm-8x"),
        ("run", "recipe", "--tags=planted,throughput", "--recipes", world["dir"], f"--rate={VALUES[1]}"),
        ("bundle", "replay", world["bundle"], "--repeats", "1"),
    ]


def test_every_table_command_fits_80_columns_and_cuts_no_number(cli: Callable[..., Any],
                                                                 world: dict[str, Any]) -> None:
    for command in _table_commands(world):
        done = cli(*command)
        assert done.code == 0 and done.out.strip(), f"cmx {' '.join(command)}: {done.code} {done.err}"
        _fits(done.out)
        wide = cli(*command, "--wide")
        assert wide.code == 0 and "--wide shows" not in wide.out, f"cmx {' '.join(command)} --wide: {wide.err}"
    listed = cli("results", "list").out
    for value in VALUES:
        _whole(value, listed)
    shown = cli("results", "show", world["runs"][2]).out
    _whole(VALUES[2], shown)
    _whole(0.000123456, shown)
    swept = cli("results", "compare", "--sweep", world["sweep"]).out
    _whole(VALUES[0], swept)
    _whole(VALUES[2], swept)
    replayed = cli("bundle", "replay", world["bundle"], "--repeats", "1").out
    _whole(VALUES[0], replayed)  # the original's value, in the replay table
    run = cli("run", "recipe", "--tags=planted,throughput", "--recipes", world["dir"], f"--rate={VALUES[3]}").out
    _whole(VALUES[3], run)


def test_compare_hides_the_last_runs_names_them_and_wide_shows_them(cli: Callable[..., Any],
                                                                   world: dict[str, Any]) -> None:
    narrow = cli("results", "compare", *world["runs"])
    assert narrow.code == 0, narrow.err
    _fits(narrow.out)
    numbers = NUMBER.findall(narrow.out)
    shown = [v for v in VALUES if fmt_number(v) in numbers]
    assert fmt_number(VALUES[0]) in numbers  # the baseline is never hidden
    hidden = len(VALUES) - len(shown)
    if hidden:
        assert f"{hidden} column{'s' if hidden > 1 else ''} hidden" in narrow.out and "--wide" in narrow.out
    wide = cli("results", "compare", *world["runs"], "--wide")
    for value in VALUES:
        _whole(value, wide.out)
    assert "hidden" not in wide.out


def test_results_list_drops_low_value_columns_first_and_wide_keeps_every_value(cli: Callable[..., Any],
                                                                              world: dict[str, Any]) -> None:
    narrow = cli("results", "list").out
    assert "hidden (" in narrow and "variant" in narrow.splitlines()[-1]
    assert narrow.splitlines()[0].split()[:2] == ["run", "created"] or "created" not in narrow.splitlines()[0]
    wide = cli("results", "list", "--wide").out
    assert "hidden" not in wide
    label = "label=a-rather-long-input-value-that-would-widen-the-inputs-column-a-lot"
    assert sum(label in line for line in wide.splitlines()) == len(VALUES) + 2  # one line a run, value whole
    assert max(len(line) for line in wide.splitlines()) > WIDTH


def test_piped_without_columns_is_80_wide() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    code = "from cmx_core.results.grid import terminal_width; print(terminal_width())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True, stdin=subprocess.DEVNULL)
    assert done.stdout.strip() == "80"


def test_fit_cuts_text_drops_by_rank_and_never_cuts_a_value() -> None:
    columns = (Column("name"), Column("value", right=True, whole=True),
               Column("note", drop=2), Column("extra", drop=1))
    rows = (("a name that is long enough to be cut", "12,345,678.9 tokens/s", "x" * 30, "y" * 30),)
    assert fit(Grid(columns, rows), 70).hidden == ("note",)  # the highest rank goes first
    fitted = fit(Grid(columns, rows), 36)
    assert fitted.hidden == ("note", "extra")  # then the next
    assert len(fitted.lines) == 2 and all(len(line) <= 36 for line in fitted.lines)  # one line a row
    assert "12,345,678.9 tokens/s" in fitted.lines[1]  # whole
    assert fitted.cut and fitted.lines[1].startswith("a name that") and ELLIPSIS in fitted.lines[1]
    assert "cut" in fitted.text() and hidden_note(fitted.hidden).split(";")[0] in fitted.text()
    whole = fit(Grid(columns, rows), None)
    assert whole.hidden == () and not whole.cut and len(whole.lines) == 2 and "y" * 30 in whole.lines[1]
    assert rows[0][0] in whole.lines[1]


def test_a_text_column_gets_room_before_a_low_value_column_is_shown() -> None:
    columns = (Column("run", whole=True), Column("recipe"), Column("inputs", drop=1))
    rows = (("abc", "a-recipe-name-of-thirty-chars", "k=" + "v" * 40),)
    fitted = fit(Grid(columns, rows), 45)
    assert fitted.hidden == ("inputs",) and rows[0][1] in fitted.lines[1]
    assert fit(Grid(columns, rows), 70).hidden == ()  # room for both: the inputs are cut instead


def test_a_table_with_nothing_left_to_drop_runs_wide_rather_than_cut() -> None:
    columns = (Column("value", right=True, whole=True),)
    fitted = fit(Grid(columns, (("123,456,789,012.5",),)), 10)
    assert "123,456,789,012.5" in fitted.lines[1]


def test_fit_text_wraps_at_spaces_with_a_hanging_indent() -> None:
    text = "  wall time 1,523,751.7 s " + "word " * 30
    lines = fit_text(text, 40).splitlines()
    assert all(len(line) <= 40 for line in lines) and lines[1].startswith("      ")
    assert "1,523,751.7" in lines[0]


@pytest.mark.parametrize(("value", "shown"), [
    (1523751.73, "1,523,751.7"), (1523751, "1,523,751"), (12.34567, "12.346"), (0.000123456, "0.0001235"),
    (None, "-"), (0.0, "0"),
])
def test_one_number_format_for_terminal_and_report(value: float | None, shown: str) -> None:
    assert fmt_number(value) == shown == fmt(value)


def test_a_narrow_sweep_table_hides_the_run_then_the_last_metrics() -> None:
    metrics = {f"metric_{i}": "tokens/s" for i in range(4)}
    rows = (SweepRow(0, {"rate": "8"}, "valid", "0123456789abcdef", dict.fromkeys(metrics, VALUES[2])),)
    fitted = fit(SweepTable("sw-1", ("rate",), metrics, rows).grid(), 60)
    names = [f"{m} (tokens/s)" for m in metrics]
    hidden_metrics = [name for name in names if name in fitted.hidden]
    assert "run" in fitted.hidden and hidden_metrics and hidden_metrics == names[len(names) - len(hidden_metrics):]
    assert all(len(line) <= 60 for line in fitted.lines) and fmt_number(VALUES[2]) in NUMBER.findall(fitted.text())
