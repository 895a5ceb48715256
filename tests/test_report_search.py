"""The search of a ``cmx sweep --search`` in ``cmx results report --sweep ID``: a real 4-run
search of the demo sort gives a page whose search section holds the best value and run the
manifest names, and the figure of the search embedded; the builder, on a manifest with an
infeasible, a failed and a pruned trial and a noise estimate, plots only values the manifest
holds (the failed trial nowhere, the pruned one at its last live value) and says the
runner-up's distance in noise units, or that the noise is unknown when the manifest has none.

Nothing here depends on the machine's speed: the real search's values are whatever it
measured, and every check reads them back from its manifest."""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cmx_core.report.collect import ReportData, search_report
from cmx_core.report.html import render
from cmx_core.report.search import plot_of, read_search, section_of
from cmx_core.results.numbers import fmt_number

SEARCH = ["sweep", "--tags=demo,sort", "--matrix", "size=1000..64000*2", "--search", "max:items_per_second",
          "--budget", "4", "--json"]


@pytest.fixture(scope="module")
def search_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real 4-run search in its own CMX_HOME (shared by the tests of this module)."""
    from cmx_core import paths
    from cmx_core.cli.main import main

    home = tmp_path_factory.mktemp("search-home")
    buffer = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CMX_HOME", str(home))
        with contextlib.redirect_stdout(buffer):
            code = main(SEARCH)
        assert code == 0
        sweep_id = json.loads(buffer.getvalue())["sweep_id"]
        manifest = json.loads((paths.data_dir() / "sweeps" / f"{sweep_id}.json").read_text())
    return {"home": home, "sweep_id": sweep_id, "manifest": manifest}


def test_report_of_a_real_search_shows_its_best_point_and_figure(search_home: dict[str, Any],
                                                                 cli: Callable[..., Any], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_HOME", str(search_home["home"]))
    search = search_home["manifest"]["search"]
    assert search["measured"] == 4 and search["grid_points"] == 7 and search["best"] is not None
    page = tmp_path / "report.html"
    done = cli("results", "report", "--sweep", search_home["sweep_id"], "-o", page, "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["figures"][0] == "search: maximize items_per_second"
    html = page.read_text()
    section = html[html.index('<h2 id="search">'):html.index("<h2>Plots</h2>")]
    best = search["best"]
    assert "Search: maximize items_per_second" in section
    assert f"{fmt_number(best['value'])} items/s (run {best['run_id']})" in section  # the manifest's best
    assert "4 of 7 grid points; budget 4 runs" in section and search["stopped"] in section
    noise = search.get("noise")
    if noise is not None and isinstance(noise.get("distance"), (int, float)):  # the confirmation runs' noise
        assert f"; {noise['distance']:.1f} noise units" in section
    else:
        assert "noise unknown" in section  # no estimate in the manifest: none is invented
    parsed = read_search(search_home["manifest"])
    assert parsed is not None
    plot = plot_of(parsed, None)
    assert plot is not None and plot.best.y == (best["value"],)
    sigma = (noise or {}).get("sigma")
    assert plot.band == ((best["value"] - sigma, best["value"] + sigma) if isinstance(sigma, float) else None)
    for trial in search["trials"]:
        assert trial["run_id"] in section
    embedded = re.search(r'<img src="data:image/png;base64,([^"]+)" alt="search: maximize items_per_second"', html)
    assert embedded is not None
    png = base64.b64decode(embedded.group(1))
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


MANIFEST: dict[str, Any] = {"points": [], "search": {
    "metric": "items_per_second", "direction": "maximize", "constraints": ["best_time_s<=0.5"],
    "budget_runs": 6, "budget_s": None, "seed": 0, "sampler": "tpe", "grid_points": 12, "measured": 6,
    "stopped": "the budget of 6 runs is spent", "filled_at_random": 0,
    "best": {"index": 4, "point": {"size": "8000"}, "value": 500.0, "run_id": "run-best"},
    "runner_up": {"index": 2, "point": {"size": "2000"}, "value": 450.0, "run_id": "run-2"},
    "trajectory": [None, 450.0, 450.0, 500.0, 500.0, 500.0], "infeasible": [7],
    "noise": {"sigma": 20.0, "distance": 2.5, "samples": {"best": [490.0, 510.0], "runner_up": [440.0, 460.0]},
              "how": "pooled from the repeats of the two points", "verdict": "the best is ahead beyond the noise",
              "lost": 1},
    "trials": [
        {"index": 7, "point": {"size": "64000"}, "value": 300.0, "state": "infeasible", "run_id": "run-7",
         "filled": False, "message": "", "live": None},
        {"index": 2, "point": {"size": "2000"}, "value": 450.0, "state": "measured", "run_id": "run-2",
         "filled": False, "message": "", "live": None},
        {"index": 9, "point": {"size": "256000"}, "value": None, "state": "failed", "run_id": "run-9",
         "filled": False, "message": "exit status 1", "live": None},
        {"index": 4, "point": {"size": "8000"}, "value": 500.0, "state": "measured", "run_id": "run-best",
         "filled": False, "message": "", "live": None},
        {"index": 5, "point": {"size": "16000"}, "value": None, "state": "pruned", "run_id": "run-5",
         "filled": False, "message": "its live series was hopeless", "live": 120.0},
        {"index": 3, "point": {"size": "4000"}, "value": 420.0, "state": "measured", "run_id": "run-3",
         "filled": False, "message": "", "live": None},
    ]}}


def _facts(manifest: dict[str, Any]) -> dict[str, str]:
    search = read_search(manifest)
    assert search is not None
    return {f.label: f.value for f in section_of(search, "items/s").facts}


def test_the_figure_plots_only_values_the_manifest_holds() -> None:
    search = read_search(MANIFEST)
    assert search is not None
    plot = plot_of(search, "items/s")
    assert plot is not None and plot.runs == 6 and plot.title == "search: maximize items_per_second"
    assert (plot.measured.x, plot.measured.y) == ((2, 4, 6), (450.0, 500.0, 420.0))
    assert (plot.infeasible.x, plot.infeasible.y) == ((1,), (300.0,))
    assert (plot.pruned.x, plot.pruned.y) == ((5,), (120.0,))  # hollow, at the last live value
    assert plot.pruned.label == "pruned (last live value)" and plot.infeasible.label == "broke a constraint"
    drawn = {x for m in (plot.measured, plot.infeasible, plot.pruned, plot.best) for x in m.x}
    assert 3 not in drawn  # the failed run: no value, so not drawn (never as zero)
    assert plot.trajectory.x == (2, 3, 4, 5, 6)  # no best before the first feasible run
    assert plot.trajectory.y == (450.0, 450.0, 500.0, 500.0, 500.0)
    assert (plot.best.x, plot.best.y) == ((4,), (500.0,))
    assert plot.band == (480.0, 520.0)  # best ± sigma


def test_the_section_says_what_the_search_found() -> None:
    facts = _facts(MANIFEST)
    assert facts["objective"] == "maximize items_per_second subject to best_time_s<=0.5"
    assert facts["sampler"] == "tpe (seed 0)" and facts["stopped"] == "the budget of 6 runs is spent"
    assert facts["measured"] == "6 of 12 grid points; budget 6 runs"
    assert facts["best"] == "size=8000: 500 items/s (run run-best)"
    assert facts["runner-up"] == "size=2000: 450 items/s (run run-2)"
    assert facts["runner-up's distance"] == \
        "10.0 % below the best; 2.5 noise units (the best is ahead beyond the noise)"
    assert facts["noise"] == ("sigma 20 items/s from 4 sample(s); pooled from the repeats of the two points; "
                              "1 confirmation run(s) gave no trusted value")
    assert facts["trials"] == "3 measured, 1 infeasible (broke a constraint), 1 pruned, 1 failed"
    search = read_search(MANIFEST)
    assert search is not None
    lines = section_of(search, "items/s").trials
    assert lines[2].value == "-" and lines[2].run == "run-9 exit status 1"  # failed: "-" with its reason
    assert lines[4].value == "- (pruned; last live value 120 items/s)"


def test_a_manifest_without_live_or_noise_invents_neither() -> None:
    """A manifest written before ``live`` and ``noise`` existed: no hollow marker, no band, and
    the distance says the noise is unknown."""
    manifest = copy.deepcopy(MANIFEST)
    del manifest["search"]["noise"]
    for trial in manifest["search"]["trials"]:
        del trial["live"]
    search = read_search(manifest)
    assert search is not None
    plot = plot_of(search, None)
    assert plot is not None and plot.pruned.x == () and plot.band is None
    assert plot.ylabel == "items_per_second"
    facts = _facts(manifest)
    assert facts["runner-up's distance"] == \
        "10.0 % below the best; noise unknown (the manifest has no noise estimate)"
    assert facts["noise"] == "- (the manifest has no noise estimate)"
    manifest["search"]["noise"] = {"sigma": None, "distance": None, "samples": {"best": [500.0], "runner_up": []},
                                   "how": "one run a point"}
    assert _facts(manifest)["runner-up's distance"].endswith("; noise unknown (one run a point)")


def test_a_search_with_no_feasible_point_names_no_best() -> None:
    manifest = copy.deepcopy(MANIFEST)
    search = manifest["search"]
    search["trials"] = [t for t in search["trials"] if t["state"] in ("infeasible", "failed")]
    search.update(best=None, runner_up=None, trajectory=[None, None], noise=None)
    facts = _facts(manifest)
    assert facts["best"] == "- (no measured point met the constraints)"
    assert facts["runner-up"] == "- (no best point)" and facts["runner-up's distance"] == "- (no runner-up)"
    only_failed = copy.deepcopy(manifest)
    only_failed["search"]["trials"] = [t for t in search["trials"] if t["state"] == "failed"]
    parsed = read_search(only_failed)
    assert parsed is not None and plot_of(parsed, None) is None  # nothing to draw: no figure
    assert _facts(only_failed)["best"] == "- (no run gave a trusted value of items_per_second)"


def test_a_grid_sweep_has_no_search_and_a_search_renders_escaped() -> None:
    assert read_search({"points": []}) is None and search_report(None, None) == (None, [])
    manifest = copy.deepcopy(MANIFEST)
    manifest["search"]["trials"][0]["message"] = "<script>alert(1)</script>"
    section, figures = search_report(manifest, None)
    assert section is not None and [f.title for f in figures] == ["search: maximize items_per_second"]
    assert figures[0].png.startswith(b"\x89PNG")
    html = render(ReportData("sweep sw-x", (), None, None, tuple(figures), (), None, section))
    assert '<h2 id="search">Search: maximize items_per_second</h2>' in html and "2.5 noise units" in html
    assert "<script" not in html and "&lt;script&gt;" in html
