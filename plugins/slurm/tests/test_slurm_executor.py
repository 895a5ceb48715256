"""The slurm executor on a real Slurm: results equal the local executor's except the host
fields, a far failure and a cancelled job are error results, Ctrl-C cancels the job, and a
2-task job hands each task the rendezvous variables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cmx_core.api import comparable
from cmx_core.errors import StepFailed
from cmx_core.testing.runs import engine
from cmx_slurm.testing import Cluster

NOOP = """\
name: test-slurm-noop
tags: [test, slurm, noop]
summary: no-op SUT through LoadGen, run by the slurm executor
steps:
  - uses: mlperf.loadgen
    with:
      sut: noop
      sut_params: {total_sample_count: 1024, performance_sample_count: 256}
      scenario: Offline
      model_name: resnet50
      duration_s: 0.2
"""

FAILING = """\
name: test-slurm-fail
tags: [test, slurm, fail]
summary: a step that fails on the far side
steps:
  - uses: shell
    with: {cmd: [sh, -c, "echo broken >&2; exit 3"]}
"""

SLOW = """\
name: test-slurm-slow
tags: [test, slurm, slow]
summary: a step that sleeps until it is cancelled
steps:
  - uses: shell
    measures: true
    with: {cmd: [sleep, "120"]}
"""

RANKS = """\
name: test-slurm-ranks
tags: [test, slurm, ranks]
summary: each task writes the rendezvous variables it got
inputs:
  out_dir: {type: string}
steps:
  - uses: shell
    measures: true
    with:
      cmd: [sh, -c,
            'env | grep -E "^(MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK)=" | sort >"$0/rank-$RANK.env"',
            "{{ inputs.out_dir }}"]
      env_allow: [MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK]
"""

def _recipe(tmp_path: Path, text: str) -> list[Path]:
    folder = tmp_path / "recipes"
    folder.mkdir(exist_ok=True)
    (folder / "r.yaml").write_text(text)
    return [folder]


@pytest.mark.parametrize(("tags", "recipe"), [("demo,sort", None), ("detect,os", None), ("test,slurm,noop", NOOP)])
def test_slurm_runs_equal_local_runs(slurm: Cluster, cmx_home: Path, tmp_path: Path, tags: str,
                                     recipe: str | None) -> None:
    dirs = _recipe(tmp_path, recipe) if recipe else []
    local = engine.run_tags(tags, recipes_dirs=dirs, executor="local")
    remote = engine.run_tags(tags, recipes_dirs=dirs, executor="slurm", options={"poll_s": "0.2"})
    assert comparable(remote.document) == comparable(local.document)
    assert remote.document["status"] in ("valid", "completed")
    stage = remote.run_dir / "remote-stage"
    record = json.loads((stage / "slurm-job.json").read_text())
    assert record["job_id"].isdigit() and record["tasks"] == 1
    assert (stage / f"slurm-{record['job_id']}.out").is_file()  # the job's log came back into the run
    far = json.loads((remote.run_dir / "remote" / "result.json").read_text())
    assert far["run_id"] != remote.run_id
    state = subprocess.run(["scontrol", "show", "job", "-o", record["job_id"]], capture_output=True, text=True,
                           check=True).stdout
    assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state


def test_a_far_failure_is_an_error_result_with_the_step_error(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    with pytest.raises(StepFailed, match="exited with code 3: broken") as caught:
        engine.run_tags("test,slurm,fail", recipes_dirs=_recipe(tmp_path, FAILING), executor="slurm")
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error" and document["error"]["node"] == "test-slurm-fail"


def _job_of(home: Path, deadline_s: float = 120) -> tuple[str, Path]:
    """(job id, stage dir) of the one run under ``home`` once its job has started."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for record in home.glob("data/runs/*/remote-stage/slurm-job.json"):
            if (record.parent / "started").exists():
                return json.loads(record.read_text())["job_id"], record.parent
        time.sleep(0.1)
    raise AssertionError(f"no slurm job started under {home} within {deadline_s} s")


def _state(job_id: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                         check=False).stdout
    return out.split("JobState=", 1)[1].split()[0] if "JobState=" in out else "?"


def test_a_job_cancelled_outside_is_an_error_result(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    dirs = _recipe(tmp_path, SLOW)
    found: list[str] = []

    def cancel_when_started() -> None:
        job_id, _ = _job_of(cmx_home)
        found.append(job_id)
        subprocess.run(["scancel", job_id], check=True, timeout=60)

    canceller = threading.Thread(target=cancel_when_started)
    canceller.start()
    try:
        with pytest.raises(StepFailed, match="slurm job was cancelled without writing") as caught:
            engine.run_tags("test,slurm,slow", recipes_dirs=dirs, executor="slurm", options={"poll_s": "0.2"})
    finally:
        canceller.join(timeout=180)
    document = json.loads(Path(caught.value.result_path).read_text())  # type: ignore[attr-defined]
    assert document["status"] == "error" and "Slurm state CANCELLED" in document["error"]["message"]
    assert _state(found[0]) == "CANCELLED"


def test_ctrl_c_cancels_the_job(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    dirs = _recipe(tmp_path, SLOW)
    proc = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=test,slurm,slow",
                             "--recipes", str(dirs[0]), "--executor", "slurm"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        job_id, _ = _job_of(cmx_home)
        assert _state(job_id) == "RUNNING"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0 and "the slurm job was cancelled" in err, err
    assert _state(job_id) == "CANCELLED"
    gone = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, check=False).stdout
    assert gone.strip() == ""  # it left the queue before cmx returned


def test_two_tasks_get_the_rendezvous_variables(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    out.mkdir()
    run = engine.run_tags("test,slurm,ranks", {"out_dir": str(out)}, recipes_dirs=_recipe(tmp_path, RANKS),
                     executor="slurm", options={"ntasks_per_node": "2"})
    assert run.document["status"] == "completed"
    record = json.loads((run.run_dir / "remote-stage" / "slurm-job.json").read_text())
    assert record["tasks"] == 2 and "--ntasks-per-node=2" in record["sbatch"]
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    seen = {}
    for rank in (0, 1):
        lines = (out / f"rank-{rank}.env").read_text().split()
        seen[rank] = dict(line.split("=", 1) for line in lines)
    port = str(20000 + int(record["job_id"]) % 10000)
    for rank, env in seen.items():
        assert env == {"MASTER_ADDR": host, "MASTER_PORT": port, "WORLD_SIZE": "2", "RANK": str(rank),
                       "LOCAL_RANK": str(rank)}
    assert (run.run_dir / "remote" / "result.json").is_file()       # rank 0: the run's result
    assert (run.run_dir / "remote-rank-1" / "result.json").is_file()  # rank 1 ran the same plan
