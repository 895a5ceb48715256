"""`cmx sweep`: one normal, stored run per point of a matrix, in its own process; a failed
point does not stop the others and the exit status counts them; bad input stops the sweep
before any point runs; `cmx results compare --sweep ID` has one row per point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.errors import UsageError
from cmx_core.results.store import ResultStore
from cmx_core.sweep.runner import Axis, parse_axes, points
from cmx_core.testing import exit_code_recipe

EXITS = exit_code_recipe("test-sweep-exit", "exit")


def test_axes_and_points() -> None:
    axes = parse_axes(["scenario=Offline,Server", "batch-size=1,8,32"])
    assert axes == (Axis("scenario", ("Offline", "Server")), Axis("batch_size", ("1", "8", "32")))
    product = points(axes)
    assert len(product) == 6 and product[0] == {"scenario": "Offline", "batch_size": "1"}
    assert product[-1] == {"scenario": "Server", "batch_size": "32"}
    zipped = points(parse_axes(["a=1,2,3", "b=x,y,z"]), zipped=True)
    assert zipped == [{"a": "1", "b": "x"}, {"a": "2", "b": "y"}, {"a": "3", "b": "z"}]


def test_ranges_expand_to_their_values() -> None:
    assert parse_axes(["n=1..4"])[0].values == ("1", "2", "3", "4")
    assert parse_axes(["batch=1..256*2"])[0].values == tuple(str(2 ** i) for i in range(9))
    assert parse_axes(["f=0.1..0.5/0.1"])[0].values == ("0.1", "0.2", "0.3", "0.4", "0.5")
    assert parse_axes(["n=10..25/5"])[0].values == ("10", "15", "20", "25")
    assert parse_axes(["x=1..2,3"])[0].values == ("1..2", "3")  # a list with a range in it is a list


@pytest.mark.parametrize(("pairs", "zipped", "message"), [
    (["n=8..1"], False, r"expected LO..HI with LO <= HI"),
    (["n=1..8*1"], False, r"\*FACTOR > 1"),
    (["f=0.1..0.5"], False, r"a range of decimals needs a step"),
    (["n=1..100000"], False, r"more than 10000 values"),
    (["scenario"], False, r"--matrix 'scenario': expected KEY=V1,V2"),
    (["scenario=a,,b"], False, r"non-empty values"),
    (["a=1", "a=2"], False, r"--matrix a: given twice"),
    ([], False, r"give at least one --matrix"),
    (["a=1,2", "b=1"], True, r"--zip: every --matrix needs the same number of values \(a has 2, b has 1\)"),
])
def test_bad_matrices_are_one_line_errors(pairs: list[str], zipped: bool, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        points(parse_axes(pairs), zipped=zipped)


def _manifest(out: str) -> dict[str, Any]:
    document = json.loads(out)
    assert isinstance(document, dict)
    return document


def test_a_12_point_sweep_stores_12_runs_and_compares_them(cli: Callable[..., Any]) -> None:
    result = cli("sweep", "--tags=demo,sort", "--matrix", "size=5,10,20", "--matrix", "repeats=1,2,3,4",
                 "-j", "2", "--json")
    assert result.code == 0, result.err
    sweep = _manifest(result.out)
    assert sweep["failed"] == 0 and len(sweep["points"]) == 12 and sweep["axes"] == ["size", "repeats"]
    store = ResultStore(paths.results_db())
    for point in sweep["points"]:
        document = store.get(point["run_id"]).document
        assert document["provenance"]["sweep"] == {"id": sweep["sweep_id"], "index": point["index"],
                                                   "point": point["point"]}
        assert document["provenance"]["query"]["inputs"]["size"] == int(point["point"]["size"])
    table = cli("results", "compare", "--sweep", sweep["sweep_id"], "--json")
    assert table.code == 0, table.err
    rows = json.loads(table.out)["rows"]
    assert [r["index"] for r in rows] == list(range(12))
    assert {r["point"]["size"] for r in rows} == {"5", "10", "20"} and all(r["metrics"] for r in rows)
    shown = cli("results", "compare", "--sweep", sweep["sweep_id"])
    assert shown.code == 0 and f"sweep {sweep['sweep_id']} (12 points)" in shown.out


def test_failed_points_do_not_stop_the_others_and_are_counted(cli: Callable[..., Any],
                                                              recipes: Callable[[str, str], Path]) -> None:
    directory = recipes("exits.yaml", EXITS).parent
    result = cli("sweep", "--tags=test,sweep,exit", "--recipes", str(directory), "--matrix", "code=0,3,0,4",
                 "--json")
    sweep = _manifest(result.out)
    assert result.code == 2 == sweep["failed"]  # the exit status is the number of failed points
    statuses = [(p["point"]["code"], p["status"], p["exit_code"] != 0) for p in sweep["points"]]
    assert statuses == [("0", "completed", False), ("3", "error", True), ("0", "completed", False),
                        ("4", "error", True)]
    assert all(p["run_id"] for p in sweep["points"])  # failed points are stored error results too


def test_bad_input_stops_the_sweep_before_any_point_runs(cli: Callable[..., Any]) -> None:
    result = cli("sweep", "--tags=demo,sort", "--matrix", "size=5,oops")
    assert result.code == 2
    assert result.err_lines[-1].startswith("cmx: error: sweep: point 1 (size=oops): ")
    assert not (paths.data_dir() / "sweeps").exists()  # nothing ran, nothing was written
    unknown = cli("sweep", "--tags=demo,sort", "--matrix", "scenario=a,b")
    assert unknown.code == 2 and "unknown input 'scenario'" in unknown.err
    both = cli("sweep", "--tags=demo,sort", "--matrix", "size=5,6", "--size=7")
    assert both.code == 2 and "size is both an input and a --matrix axis" in both.err


def test_compare_needs_runs_or_a_known_sweep(cli: Callable[..., Any]) -> None:
    assert "give two or more runs, or --sweep ID" in cli("results", "compare", "abc").err
    missing = cli("results", "compare", "--sweep", "sw-20260101-000000-deadbeef")
    assert missing.code == 2 and "no such sweep" in missing.err
    assert "not a sweep id" in cli("results", "compare", "--sweep", "../../etc/passwd").err


def test_a_sweeps_progress_is_on_stderr_with_json_and_quiet_with_q(cli: Callable[..., Any]) -> None:
    shown = cli("sweep", "--tags=demo,sort", "--matrix", "size=5,10", "--json")
    assert shown.code == 0, shown.err
    _manifest(shown.out)
    assert len([ln for ln in shown.err_lines if ln.startswith("cmx sweep: point ")]) == 2
    quiet = cli("sweep", "-q", "--tags=demo,sort", "--matrix", "size=5,10", "--json")
    assert quiet.code == 0 and not [ln for ln in quiet.err_lines if ln.startswith("cmx sweep: point ")], quiet.err


def test_the_suggested_compare_command_is_one_line_to_copy(cli: Callable[..., Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The command the human summary suggests is a line of its own, whole at any width (it
    was wrapped into the sentence before it at 80 columns)."""
    monkeypatch.setenv("COLUMNS", "40")
    shown = cli("sweep", "--tags=demo,sort", "--matrix", "size=5,10")
    assert shown.code == 0, shown.err
    (sweep_id,) = {ln.split()[1].rstrip(":") for ln in shown.out.splitlines() if ln.startswith("sweep ")}
    assert f"  cmx results compare --sweep {sweep_id}" in shown.out.splitlines()
    compared = cli("results", "compare", "--sweep", sweep_id)
    assert compared.code == 0, compared.err
