"""The problem package read as-is: the shipped problem, and malformed packages refused with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cmx_alebench.problem import Problem, find_problem, load_problem, shipped_dir
from cmx_core.errors import UsageError


def test_the_shipped_problem(problem: Problem) -> None:
    assert problem.problem_id == "cmx001" and problem.metadata.maximize
    assert problem.constraints.time_limit_s == 2.0 and problem.constraints.memory_limit_bytes == 256 << 20
    assert len(problem.seed_list("public", False)) == 5 and len(problem.seed_list("private", False)) == 10
    assert problem.metadata.standings_source == "synthetic"
    assert problem.seed_list("private", True) == problem.seed_list("private", False)  # no lite list: the full one
    assert "original problem written for cmx" in problem.statement()
    assert not problem.allow_score_non_ac_private   # a 4-hour contest
    assert problem.relative_results_path(False) is None


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "cmx001"
    shutil.copytree(shipped_dir() / "cmx001", target)
    return target


def _edit(root: Path, change: dict[str, object]) -> None:
    path = root / "data.json"
    data = json.loads(path.read_text())
    for dotted, value in change.items():
        block = data
        *parents, key = dotted.split(".")
        for name in parents:
            block = block[name]
        if value is None:
            block.pop(key, None)
        else:
            block[key] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(("change", "fragment"), [
    ({"metadata.score_type": "best"}, "score_type 'best'"),
    ({"constraints.time_limit": None}, "'time_limit' is missing"),
    ({"constraints.memory_limit": -1}, "must be positive"),
    ({"seeds.private": []}, "seeds.private is empty"),
    ({"seeds.public": ["a"]}, "seeds.public must be a list of integers"),
    ({"metadata.relative_score_type": "median"}, "relative_score_type 'median'"),
    ({"metadata.relative_score_type": "max"}, "relative_max_score"),
    ({"metadata.problem_type": "interactive"}, "problem_type"),
    ({"metadata.problem_id": "Bad Id"}, "problem_id 'Bad Id'"),
    ({"standings_source": "kaggle"}, "standings_source 'kaggle'"),
])
def test_malformed_data_json(tmp_path: Path, change: dict[str, object], fragment: str) -> None:
    root = _copy(tmp_path)
    _edit(root, change)
    with pytest.raises(UsageError) as info:
        load_problem(root)
    message = str(info.value)
    assert fragment in message and "data.json" in message and "\n" not in message


def test_flat_data_json_is_read_too(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    data = json.loads((root / "data.json").read_text())
    flat = {**data["metadata"], **data["constraints"], **data["seeds"], "standings_source": "synthetic"}
    (root / "data.json").write_text(json.dumps(flat))
    assert load_problem(root).constraints.time_limit_s == 2.0


def test_bad_json_and_missing_tables(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "performance.csv").unlink()
    with pytest.raises(UsageError, match=r"performance\.csv are required"):
        load_problem(root)
    (root / "data.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_problem(root)


def test_find_problem_searches_given_dirs_first_and_lists_what_exists(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root, {"metadata.title": "local copy"})
    assert find_problem("cmx001", [tmp_path]).metadata.title == "local copy"
    with pytest.raises(UsageError, match=r"not found .*found: cmx001"):
        find_problem("ahc999", [tmp_path])
    with pytest.raises(UsageError, match="not a problem id"):
        find_problem("../etc", [])


def test_no_atcoder_material_is_shipped() -> None:
    names = {p.name for p in shipped_dir().rglob("*")}
    assert not any(n.endswith(".zip") or n.startswith("ahc") for n in names)
    assert {"gen.py", "tester.py", "data.json", "standings_scores.csv", "performance.csv"} <= names


def test_long_contests_score_non_ac_private_cases(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root, {"metadata.start_at": "2025-01-01T00:00:00+09:00", "metadata.end_at": "2025-01-11T00:00:00+09:00"})
    assert load_problem(root).allow_score_non_ac_private
    _edit(root, {"allow_score_non_ac_private": False})
    assert not load_problem(root).allow_score_non_ac_private
