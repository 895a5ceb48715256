"""What CONTRIBUTING.md says of the suite's own run: ``CMX_TEST_TIMELINE`` records a line per
test that ``benchmarks/bench_suite_timeline.py`` summarises by worker and scope, and the
suite's runs share one directory of compiled result validators (``CMX_VALIDATORS_DIR``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "bench_suite_timeline.py"
FILES = ["tests/test_variation_names.py", "plugins/slurm/tests/test_slurm_units.py"]


def test_a_recorded_timeline_names_each_test_its_scope_and_worker(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "CMX_TEST_TIMELINE_OWNER"}
    env.update(CMX_TEST_TIMELINE=str(timeline), PYTEST_ADDOPTS="")
    done = subprocess.run([sys.executable, "-m", "pytest", "--import-mode=importlib", "-p", "no:cacheprovider",
                           "-n", "2", "--dist", "loadscope", "-q", *FILES], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    records = [json.loads(line) for line in timeline.read_text(encoding="utf-8").splitlines()]
    assert [r["event"] for r in records if r["event"] != "test"] == ["start", "end"]
    tests = [r for r in records if r["event"] == "test"]
    passed = int(done.stdout.strip().splitlines()[-1].split()[0])
    assert len(tests) == passed  # one line per test, none from the pytest runs tests start
    assert {r["scope"] for r in tests} == {"tests/test_variation_names.py", "slurm"}
    assert {r["worker"] for r in tests} <= {"gw0", "gw1"}
    assert all(r["stop"] >= r["start"] and r["cpu_s"] >= 0 for r in tests)

    summary = subprocess.run([sys.executable, str(BENCH), str(timeline)], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    assert summary.startswith("run: ") and "machine busy CPU" in summary
    assert "slurm" in summary and "tests/test_variation_names.py" in summary
    assert any(line.strip().startswith("gw") for line in summary.splitlines())


def test_the_suites_runs_share_one_validators_directory(tmp_path: Path) -> None:
    shared = Path(os.environ["CMX_VALIDATORS_DIR"])
    assert shared.is_dir()
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=detect,os", "--json"],
                          env={**os.environ, "CMX_HOME": str(home)}, capture_output=True, text=True,
                          timeout=600, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"]
    assert not (home / "cache" / "validators").exists()
    assert any(shared.glob("*.bin"))
