"""End to end through ``cmx``: grading a submission, bad input as one line and exit 2, the
3-seed ``mle-bench,run`` of the baseline agent writing one result per seed plus an aggregate
whose members they are, ``cmx results compare`` over two aggregates, and the docker
variation refused in one line where no docker sandbox is registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BASELINE = "python /mlebench/baselines/baseline.py"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cmx-home")


def cmx(home: Path, *args: str, timeout: float = 600, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(home), **extra_env}
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_grade_a_submission(home: Path, tmp_path: Path) -> None:
    submission = tmp_path / "submission.csv"
    proc = cmx(home, "run", "recipe", "--tags=get,mle-bench,competition", "--competition=sklearn-digits", "--json")
    prepared = _json(proc)["outputs"]
    submission.write_text(Path(prepared["sample_submission"]).read_text())
    proc = cmx(home, "run", "recipe", "--tags=mle-bench,grade", "--competition=sklearn-digits",
               f"--submission={submission}", "--json")
    document = _json(proc)
    assert proc.returncode == 0, proc.stderr
    assert document["status"] == "valid" and document["benchmark"]["suite"] == "mle-bench"
    section = document["mle_bench"]
    assert section["kind"] == "report" and section["leaderboard_source"] == "synthetic"
    assert document["metrics"]["score"] == {"value": section["score"], "unit": "score", "higher_is_better": True}
    assert document["metrics"]["any_medal"]["value"] == 0 and document["benchmark"]["division"] == "unofficial"
    assert {a["kind"] for a in document["artifacts"]} >= {"grading_report"}


@pytest.mark.parametrize(("args", "message"), [
    (["--tags=mle-bench,grade", "--competition=Bad Id!", "--submission=x.csv"], "--competition 'Bad Id!'"),
    (["--tags=mle-bench,grade", "--competition=no-such-comp", "--submission=x.csv"], "has no prepared split"),
    (["--tags=mle-bench,grade", "--competition=sklearn-digits", "--submission=x.csv", "--data-dir=/nonexistent"],
     "--data-dir=/nonexistent: not a directory"),
    (["--tags=mle-bench,run", "--competition=sklearn-digits", "--agent-cmd=python 'unclosed"], "--agent-cmd="),
    (["--tags=mle-bench,run", "--competition=sklearn-digits", "--agent-cmd=x", "--seeds=0"], "seeds"),
])
def test_bad_input_is_one_line_and_exit_2(home: Path, args: list[str], message: str) -> None:
    proc = cmx(home, "run", "recipe", *args, "--json")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_the_docker_variation_needs_a_registered_docker_sandbox(home: Path) -> None:
    """Loading only this plugin (``CMX_LOAD_PLUGINS``) leaves cmx-docker's backend unregistered."""
    proc = cmx(home, "run", "recipe", "--tags=mle-bench,attempt,docker", "--competition=sklearn-digits",
               f"--agent-cmd={BASELINE}", "--json", CMX_LOAD_PLUGINS="mlebench")
    assert proc.returncode == 2 and "sandbox backend 'docker' is not registered" in proc.stderr


def test_three_seeds_make_three_results_and_an_aggregate(home: Path) -> None:
    proc = cmx(home, "run", "recipe", "--tags=mle-bench,run", "--competition=sklearn-breast-cancer",
               f"--agent-cmd={BASELINE}", "--seeds=3", "--json")
    assert proc.returncode == 0, proc.stderr
    aggregate = _json(proc)
    section = aggregate["mle_bench"]
    assert aggregate["status"] == "valid" and section["kind"] == "aggregate" and section["n"] == 3
    assert len(section["members"]) == 3 and section["missing"] == []
    members = [_json(cmx(home, "results", "show", run_id, "--json")) for run_id in section["members"]]
    assert sorted(m["mle_bench"]["seed"] for m in members) == [0, 1, 2]
    assert all(m["mle_bench"]["agent"]["verdict"] == "ok" and m["status"] == "valid" for m in members)
    per_seed = [100.0 if m["mle_bench"]["any_medal"] else 0.0 for m in members]
    mean = sum(per_seed) / 3
    sem = (sum((v - mean) ** 2 for v in per_seed) / 2) ** 0.5 / 3 ** 0.5
    assert section["mean"] == pytest.approx(mean) and section["sem"] == pytest.approx(sem)
    assert aggregate["metrics"]["any_medal_pct"]["value"] == pytest.approx(mean)
    assert aggregate["metrics"]["any_medal_pct_sem"] == {"value": pytest.approx(sem), "unit": "%",
                                                         "higher_is_better": False}

    again = _json(cmx(home, "run", "recipe", "--tags=mle-bench,run", "--competition=sklearn-breast-cancer",
                      f"--agent-cmd={BASELINE}", "--seeds=1", "--json"))
    assert again["mle_bench"]["sem"] is None and "one seed" in again["mle_bench"]["sem_reason"]
    compared = _json(cmx(home, "results", "compare", aggregate["run_id"], again["run_id"], "--json"))
    names = [m["name"] for m in compared["metrics"]]
    assert names[0] == "any_medal_pct" and "any_medal_pct_sem" in names


def test_what_the_agent_leaves_past_keep_mb_is_listed_not_kept(home: Path) -> None:
    """#54 item 3: the agent's files come back to the run directory up to ``--keep-mb``,
    smallest first; a 3 MiB leftover past a 1 MiB keep is listed with its size and never copied
    (so never redacted, digested or bundled), while the submission is kept and graded."""
    agent = f"sh -c '{BASELINE} && head -c 3145728 /dev/zero > /home/bulk.bin'"
    proc = cmx(home, "run", "recipe", "--tags=mle-bench,attempt", "--competition=sklearn-digits",
               f"--agent-cmd={agent}", "--keep-mb=1", "--json")
    assert proc.returncode == 0, proc.stderr
    document = _json(proc)
    agent_section = document["mle_bench"]["agent"]
    assert agent_section["verdict"] == "ok" and agent_section["keep_bytes"] == 1 << 20
    assert agent_section["dropped"] == [{"path": "bulk.bin", "bytes": 3 << 20}]
    assert document["mle_bench"]["valid_submission"] is True
    run_dir = next((home / "data" / "runs").glob(f"*{document['run_id'][:8]}*"))
    assert not list(run_dir.rglob("bulk.bin")) and list(run_dir.rglob("submission.csv"))
