"""``cmx results``: every subcommand's ``--json`` prints exactly one JSON document; human
tables otherwise; bad input is a one-line error with exit code 2."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.cli import results_cmd
from cmx_core.errors import ResultsError
from cmx_core.providers.values import Metric, ResultPart
from cmx_core.results import ResultStore, write_result
from cmx_core.results.examples import H100_FACTS, example_document, mlperf_part


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))
    for name in ("CMX_DATA_DIR", "CMX_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path / "home"


def _index(run_id: str, part: ResultPart | None = None, **changes: Any) -> Path:
    run_dir = paths.runs_dir() / run_id
    doc = example_document(run_dir, run_id=run_id, part=part, **changes)
    path = write_result(run_dir, doc, suites=None)
    ResultStore(paths.results_db()).index(doc, path)
    return path


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cmx")
    results_cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = _parse(argv)
    code = args.handler(args)
    out, err = capsys.readouterr()
    return code, out, err


def _one_json(out: str) -> Any:
    return json.loads(out)  # raises if there is anything but one JSON document


def test_list_json_and_table(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("run-a", mlperf_part())
    _index("run-b")
    code, out, _ = _run(["results", "list", "--json"], capsys)
    assert code == 0
    runs = _one_json(out)["runs"]
    assert sorted(r["run_id"] for r in runs) == ["run-a", "run-b"]
    code, out, _ = _run(["results", "list", "--status", "valid", "--json"], capsys)
    assert [r["run_id"] for r in _one_json(out)["runs"]] == ["run-a"]
    code, out, _ = _run(["results", "list"], capsys)
    assert code == 0 and "run-a" in out and "1,234.5 samples/s" in out and "completed" in out


def test_list_on_a_fresh_home(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["results", "list", "--json"], capsys)
    assert (code, _one_json(out)) == (0, {"runs": []})
    code, out, _ = _run(["results", "list"], capsys)
    assert "no runs indexed yet" in out
    assert not paths.results_db().exists()


def test_show_json_is_the_document(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _index("run-a1", mlperf_part(), facts=H100_FACTS)
    code, out, _ = _run(["results", "show", "run-a", "--json"], capsys)
    assert code == 0 and _one_json(out) == json.loads(path.read_text(encoding="utf-8"))
    code, out, _ = _run(["results", "show", "run-a"], capsys)
    assert "samples_per_second *" in out and "8 x NVIDIA H100 80GB HBM3" in out and "valid" in out


def test_compare_json_and_table(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("base", mlperf_part(1000.0, 40_000_000))
    _index("cand", mlperf_part(1200.0, 30_000_000))
    code, out, _ = _run(["results", "compare", "base", "cand", "--json"], capsys)
    data = _one_json(out)
    assert code == 0 and data["baseline"] == "base"
    cells = {m["name"]: m["cells"][1] for m in data["metrics"]}
    assert cells["samples_per_second"]["verdict"] == "better"
    assert cells["samples_per_second"]["delta_pct"] == pytest.approx(20.0)
    assert cells["latency_p99_ns"]["verdict"] == "better"
    code, out, _ = _run(["results", "compare", "base", "cand"], capsys)
    lines = [line.split() for line in out.splitlines()]
    # the value and verdict on the metric's line; its change against the baseline below it
    assert lines[lines.index(next(x for x in lines if "1,200.0" in x))][-2:] == ["1,200.0", "better"]
    assert "(+200, +20.0%)" in out and "30,000,000 better" in out and "(-10,000,000, -25.0%)" in out
    assert "1.5 same" in out  # wall time, equal: no delta shown


def test_compare_flags_units(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for run_id, unit in (("ms-run", "ms"), ("s-run", "s")):
        _index(run_id, ResultPart(status="completed", benchmark={"suite": "custom", "task": "t"},
                                  metrics={"latency": Metric(1.0, unit, False)}))
    _code, out, _ = _run(["results", "compare", "ms-run", "s-run"], capsys)
    assert "units differ" in out and "ms / s" in out


def test_export_json_and_csv(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("r1")
    _index("r2", mlperf_part())
    dest = tmp_path / "out.csv"
    code, out, _ = _run(["results", "export", "--format", "csv", str(dest), "r1", "r2", "--json"], capsys)
    assert code == 0 and _one_json(out) == {"format": "csv", "dest": str(dest), "runs": ["r1", "r2"]}
    assert dest.read_text(encoding="utf-8").count("\n") == 3
    code, out, _ = _run(["results", "export", "--format", "json", str(tmp_path / "o.json"), "r2"], capsys)
    assert "exported 1 run(s) as json" in out
    assert json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))[0]["run_id"] == "r2"


def test_reindex_json_reports_skips_on_stderr(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("r1")
    broken = paths.runs_dir() / "broken"
    broken.mkdir(parents=True)
    (broken / "result.json").write_text("[]", encoding="utf-8")
    code, out, err = _run(["results", "reindex", "--json"], capsys)
    data = _one_json(out)
    assert code == 0 and data["indexed"] == ["r1"] and len(data["skipped"]) == 1
    assert "skipped" in err and "broken" in err


def test_errors_are_results_errors(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("r1")
    args = _parse(["results", "show", "zzz", "--json"])
    with pytest.raises(ResultsError, match=r"no run matches 'zzz'"):
        args.handler(args)
    assert capsys.readouterr().out == ""


def _cmx(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from cmx_core.cli.main import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_through_cmx_main(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("r1", mlperf_part())
    _index("r2", mlperf_part(2000.0))
    code, out, err = _cmx(["results", "compare", "r1", "r2", "--json"], capsys)
    assert code == 0 and _one_json(out)["baseline"] == "r1"
    code, out, err = _cmx(["results", "show", "r", "--json"], capsys)
    assert code == 2 and "ambiguous" in _one_json(out)["error"]
    assert err.count("\n") == 1 and "Traceback" not in err


def test_corrupt_database_through_cmx_main(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = paths.results_db()
    db.parent.mkdir(parents=True)
    db.write_bytes(b"\x00garbage" * 64)
    code, out, err = _cmx(["results", "list"], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"cmx: error: {db}: not a readable cmx results database")
    assert "cmx results reindex" in err and err.count("\n") == 1
    assert db.read_bytes() == b"\x00garbage" * 64


def test_unknown_format_is_exit_2(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _index("r1")
    code, _out, err = _cmx(["results", "export", "--format", "xlsx", str(tmp_path / "x"), "r1"], capsys)
    assert code == 2 and "unknown export format 'xlsx'" in err and "csv, json" in err


def test_common_parent_options(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cmx_core.cli.main import common_options

    _index("r1")
    parser = argparse.ArgumentParser(prog="cmx")
    results_cmd.add_parser(parser.add_subparsers(dest="command"), common_options())
    args = parser.parse_args(["results", "list", "-v", "--json"])
    assert args.verbose and args.json
    assert args.handler(args) == 0
    assert [r["run_id"] for r in _one_json(capsys.readouterr().out)["runs"]] == ["r1"]
