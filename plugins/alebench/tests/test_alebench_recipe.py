"""The recipes end to end through ``cmx run``: public-eval, private-eval with rank and
performance, lite over two problems, repeats, and bad input as a one-line exit-2 error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx_alebench.problem import shipped_dir, shipped_solutions
from cmx_alebench.standings import load_performance, load_standings, place

pytestmark = pytest.mark.usefixtures("sandbox_ready")
SOLUTIONS = shipped_solutions()


def cmx(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", *args, "--json"], capture_output=True,
                          text=True, env=env, timeout=600, check=False)


def _doc(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout))   # exactly one JSON document on stdout


def test_public_eval(home: Path) -> None:
    doc = _doc(cmx("--tags=ale-bench,public-eval", "--problem=cmx001", f"--code={SOLUTIONS / 'trivial.py'}",
                   home=home))
    assert doc["status"] == "valid" and doc["benchmark"]["suite"] == "ale-bench"
    assert doc["benchmark"]["mode"] == "public_eval" and doc["benchmark"]["division"] == "unofficial"
    section = doc["ale_bench"]
    assert section["standings_source"] == "synthetic" and section["judge"] == "sandbox"
    entry = section["problems"][0]
    cases = entry["evaluations"][0]["cases"]
    assert [c["seed"] for c in cases] == [0, 1, 2, 3, 4]
    assert all(c["judge_result"] == "ACCEPTED" and c["memory_bytes"] > 0 for c in cases)
    assert doc["metrics"]["score"]["value"] == sum(c["absolute_score"] for c in cases)
    assert doc["metrics"]["rank"]["value"] is None and entry["evaluations"][0]["null_reason"]
    assert any(a["kind"] == "final_results" for a in doc["artifacts"])
    # the cases judged, on cmx-core's application channel (its docs/telemetry.md)
    [series] = list(home.rglob(f"*{doc['run_id'][:8]}*/telemetry.om"))
    judged = [line.split() for line in series.read_text().splitlines()
              if line.startswith(("cmx_app_cases_judged_total{", "cmx_app_problems_judged_total{"))]
    last = {fields[0].split("{")[0]: float(fields[1]) for fields in judged}
    assert last == {"cmx_app_cases_judged_total": len(cases), "cmx_app_problems_judged_total": 1.0}


def test_private_eval_rank_and_performance_by_hand(home: Path) -> None:
    doc = _doc(cmx("--tags=ale-bench,private-eval", "--problem=cmx001", f"--code={SOLUTIONS / 'trivial.cpp'}",
                   "--language=cpp20", "--num-workers=2", home=home))
    total = doc["metrics"]["score"]["value"]
    problem_root = shipped_dir() / "cmx001"
    spot = place(total, load_standings(problem_root / "standings_scores.csv"))
    assert doc["metrics"]["rank"]["value"] == spot.rank
    assert doc["metrics"]["performance"]["value"] == load_performance(problem_root / "performance.csv").performance(
        spot.rank_for_performance)
    # the synthetic standings hold three rows at the trivial total: ranks 24-26, performance at rank 25
    assert (total, spot.rank, doc["metrics"]["performance"]["value"]) == (239477, 24, 1000)
    assert len(doc["ale_bench"]["problems"][0]["evaluations"][0]["cases"]) == 10
    assert doc["benchmark"]["primary_metric"] == "performance"


def test_non_ac_private_is_invalid_with_its_verdict(home: Path) -> None:
    doc = _doc(cmx("--tags=ale-bench,private-eval", "--problem=cmx001", f"--code={SOLUTIONS / 'ce.cpp'}",
                   "--language=cpp17", home=home))
    assert doc["status"] == "invalid" and doc["invalid_reasons"] == ["cmx001 repeat 0: COMPILATION_ERROR"]
    assert doc["metrics"]["score"]["value"] == 0
    last = load_standings(shipped_dir() / "cmx001" / "standings_scores.csv")[-1]
    assert doc["metrics"]["rank"]["value"] == last.first    # a total of 0 gets the score-0 rank


def test_lite_over_two_problems_and_repeats(home: Path, tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    shutil.copytree(shipped_dir() / "cmx001", problems / "cmx002")
    data = json.loads((problems / "cmx002" / "data.json").read_text())
    data["metadata"]["problem_id"] = "cmx002"
    data["seeds"]["public_lite"] = [7, 8]
    (problems / "cmx002" / "data.json").write_text(json.dumps(data))
    doc = _doc(cmx("--tags=ale-bench,lite,public-eval", "--problems=all", f"--problems_dir={problems}",
                   f"--code={SOLUTIONS / 'trivial.py'}", "--repeats=2", home=home))
    entries = {e["problem_id"]: e for e in doc["ale_bench"]["problems"]}
    assert set(entries) == {"cmx001", "cmx002"} and doc["benchmark"]["task"] == "lite"
    assert [c["seed"] for c in entries["cmx002"]["evaluations"][0]["cases"]] == [7, 8]
    for entry in entries.values():
        first, second = entry["evaluations"]
        assert [first["repeat_index"], second["repeat_index"]] == [0, 1]
        assert first["overall_absolute_score"] == second["overall_absolute_score"]   # deterministic solution
    assert doc["metrics"]["accepted_problems"]["value"] == 2


@pytest.mark.parametrize(("args", "fragment"), [
    (("--problem=nope",), "--problem 'nope' not found"),
    (("--problem=cmx001", "--num-workers=4096"), "--num_workers 4096 must be between 1"),
    (("--problem=cmx001", "--language=cobol"), "cobol"),
])
def test_bad_input_is_one_line_exit_2(home: Path, args: tuple[str, ...], fragment: str) -> None:
    proc = cmx("--tags=ale-bench,public-eval", f"--code={SOLUTIONS / 'trivial.py'}", *args, home=home)
    assert proc.returncode == 2
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
    assert len(json.loads(proc.stdout)) >= 1


def test_missing_code_file(home: Path, tmp_path: Path) -> None:
    proc = cmx("--tags=ale-bench,public-eval", "--problem=cmx001", f"--code={tmp_path / 'absent.py'}", home=home)
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
