"""cmx results report|plot: a self-contained HTML page of a 12-point sweep, rendered in real
headless Chromium (Debian's package); the screenshot must not be blank and the page must log
no console error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

CHROMIUM = shutil.which("chromium")
REPORT_SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "cmx_core" / "schemas" / "report.schema.json")
                           .read_text())
_CONSOLE_ERROR = re.compile(r"Uncaught|ERROR:CONSOLE|:CONSOLE\(\d+\)\].*(error|Error)")


def _screenshot(page: Path, shot: Path) -> str:
    """Render ``page`` headless; return Chromium's stderr (console messages are logged there)."""
    assert CHROMIUM, "chromium is not installed: apt-get install -y chromium (scripts/install.sh does)"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={shot.parent / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2200",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def _distinct_colours(shot: Path) -> int:
    from PIL import Image

    with Image.open(shot) as image:
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or ())


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE_ERROR.search(line)]


@pytest.fixture(scope="module")
def sweep_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One 12-point demo sweep in its own CMX_HOME (shared by the tests of this module)."""
    from cmx_core.cli.main import main

    home = tmp_path_factory.mktemp("sweep-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CMX_HOME", str(home))
        out = tmp_path_factory.mktemp("out") / "sweep.json"
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(["sweep", "--tags=demo,sort", "--matrix", "size=5,10,20", "--matrix", "repeats=1,2,3,4",
                         "--json"])
        out.write_text(buffer.getvalue())
    assert code == 0
    return {"home": home, "sweep": json.loads(buffer.getvalue())}


@pytest.fixture
def in_sweep_home(sweep_home: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("CMX_HOME", str(sweep_home["home"]))
    return sweep_home


def test_sweep_report_renders_in_chromium(in_sweep_home: dict[str, Any], cli: Callable[..., Any],
                                          tmp_path: Path) -> None:
    sweep_id = in_sweep_home["sweep"]["sweep_id"]
    page = tmp_path / "report.html"
    done = cli("results", "report", "--sweep", sweep_id, "-o", page, "--json")
    assert done.code == 0, done.err
    data = json.loads(done.out)
    assert len(data["runs"]) == 12 and data["report"] == str(page)
    # each result metric against each swept axis; items (an echo of size) is not plotted as a result
    assert {"items_per_second by size", "items_per_second by repeats", "best_time_s by size"} <= set(data["figures"])
    assert not [f for f in data["figures"] if f.startswith("items by")]
    html = page.read_text()
    assert html.count("data:image/png;base64,") == len(data["figures"]) >= 2
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html), "the page must be self-contained"
    assert "<script" not in html
    for run_id in data["runs"]:
        assert run_id in html
    stderr = _screenshot(page, tmp_path / "shot.png")
    assert _console_errors(stderr) == []
    assert _distinct_colours(tmp_path / "shot.png") > 200  # tables, coloured text and plots, not a blank page


def test_the_console_check_catches_a_script_error(tmp_path: Path) -> None:
    """The detector used above is not vacuous: a page that throws is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><p>x</p><script>undefinedFunction();</script></body></html>")
    stderr = _screenshot(page, tmp_path / "bad.png")
    assert _console_errors(stderr), stderr[-1500:]
    assert _distinct_colours(tmp_path / "bad.png") < 50  # and a nearly blank page has few colours


def test_single_plot_of_a_sweep_and_bad_metric(in_sweep_home: dict[str, Any], cli: Callable[..., Any],
                                               tmp_path: Path) -> None:
    sweep_id = in_sweep_home["sweep"]["sweep_id"]
    figure = tmp_path / "fig.png"
    done = cli("results", "plot", "--sweep", sweep_id, "--metric", "items", "-o", figure, "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["title"] == "items by size"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and _distinct_colours(figure) > 20
    bad = cli("results", "plot", "--sweep", sweep_id, "--metric", "nope", "-o", tmp_path / "x.png")
    assert bad.code == 2 and "--metric nope" in bad.err and "items_per_second" in bad.err
    assert not (tmp_path / "x.png").exists()
    wrong = cli("results", "report", "--sweep", sweep_id, "-o", tmp_path / "r.pdf")
    assert wrong.code == 2 and ".html" in wrong.err and "Traceback" not in wrong.err
    both = cli("results", "report", "--sweep", sweep_id, "--recipe", "demo-sort", "-o", tmp_path / "r.html")
    assert both.code == 2 and "exactly one" in both.err and not (tmp_path / "r.html").exists()


def test_recipe_report_of_a_2_axis_sweep_and_earlier_runs_knows_its_axes(in_sweep_home: dict[str, Any],
                                                                          cli: Callable[..., Any],
                                                                          tmp_path: Path) -> None:
    """Issue 53's must-show: the recipe's report over the 12 points of a size x repeats sweep
    plus two more runs, rendered in Chromium: a metric-against-axis plot per result metric, no
    better or worse on an input (items echoes size), and noise bands from the repetitions timed
    inside a run."""
    for size in ("40", "7"):
        assert cli("run", "recipe", "--tags=demo,sort", f"--size={size}", "--repeats=3", "--json").code == 0
    page = tmp_path / "recipe.html"
    done = cli("results", "report", "--recipe", "demo-sort", "-o", page, "--json")
    assert done.code == 0, done.err
    data = json.loads(done.out)
    jsonschema.validate(data, REPORT_SCHEMA)  # the report's data as one document, against its schema
    figures = data["figures"]
    assert [p["title"] for p in data["axis_plots"]] == [f for f in figures if " by " in f]
    by_size = next(p for p in data["axis_plots"] if p["title"] == "items_per_second by size")
    assert by_size["log_x"] is False and len(by_size["lines"]) >= 4  # one line per repeats value
    assert any(point["n"] == 3 for line in by_size["lines"] for point in line["points"])  # a run's 3 repetitions
    assert data["comparison"]["axes"] == ["repeats", "size"] or set(data["comparison"]["axes"]) == {"repeats", "size"}
    assert data["baseline"].startswith("baseline ")
    # comparisons within like configurations only: a judged cell's run is compared with a run of
    # its own configuration and hardware class; the first run of another is its own series
    columns = data["comparison"]["runs"]
    by_id = {run["run_id"]: run for run in columns}
    cells = [(run, cell) for row in data["comparison"]["metrics"]
             for run, cell in zip(columns, row["cells"], strict=True)]
    judged = [(run, cell) for run, cell in cells if cell["verdict"] in ("better", "worse", "same", "within noise",
                                                                         "inconclusive")]
    for run, _cell in judged:
        like = by_id[run["against"]]
        assert (like["config"], like["hardware_class"]) == (run["config"], run["hardware_class"])
    assert any(cell["verdict"] == "other series" and cell["delta"] is None for _run, cell in cells)
    across = json.loads(cli("results", "report", "--recipe", "demo-sort", "-o", tmp_path / "across.html",
                            "--across", "size,repeats", "--json").out)["comparison"]   # compared across on purpose
    verdicts = {cell["verdict"] for row in across["metrics"] for cell in row["cells"][1:]}
    assert across["across"] == ["size", "repeats"] and "other series" not in verdicts and verdicts & {
        "better", "worse", "within noise", "inconclusive"}
    assert {run["against"] for run in across["runs"][1:]} == {across["baseline"]}
    assert {"items_per_second by size", "items_per_second by repeats", "best_time_s by size",
            "best_time_s by repeats"} <= set(figures)
    assert not [f for f in figures if f.startswith("items by")]
    html = page.read_text()
    assert "Comparison (baseline" in html and "What changed between the runs" in html
    items_row = html.split('<td class="l">items (', 1)[-1].split("</tr>", 1)[0] if '<td class="l">items (' in html \
        else html.split('<td class="l">items</td>', 1)[1].split("</tr>", 1)[0]
    assert "input" in items_row and "worse" not in items_row and "better" not in items_row
    assert "n=3" in html  # a run that timed 3 repetitions carries their band
    stderr = _screenshot(page, tmp_path / "recipe.png")
    assert _console_errors(stderr) == [] and _distinct_colours(tmp_path / "recipe.png") > 200
