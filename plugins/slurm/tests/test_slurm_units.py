"""What needs no Slurm: resources from plan and settings, bad options as one-line usage
errors, the scripts' quoting (run for real in bash), Slurm's states, the poll backoff."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_core.testing import execution_context
from cmx_core.testing.runs import engine
from cmx_slurm import script, slurmcli
from cmx_slurm.poll import Backoff
from cmx_slurm.resources import plan_resources
from cmx_slurm.settings import SlurmSettings

# Lines as scontrol show job -o printed them on the test cluster (shortened).
COMPLETED = ("JobId=3 JobName=wrap UserId=root(0) JobState=COMPLETED Reason=None Dependency=(null) "
             "ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED")
FAILED = "JobId=7 JobName=cmx-x JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0"
TIMEOUT = "JobId=8 JobName=cmx-x JobState=TIMEOUT Reason=TimeLimit Dependency=(null) ExitCode=0:15"


def test_an_accelerator_requirement_asks_for_a_gpu_and_a_constraint() -> None:
    res = plan_resources([{}, {"accelerator": "h100"}], SlurmSettings())
    assert res.sbatch_args() == ["--nodes=1", "--ntasks-per-node=1", "--constraint=h100", "--gres=gpu:1"]
    res = plan_resources([{"accelerator": ["a100", "h100"], "gpus.count": 4}],
                         SlurmSettings(gpu_request="gpus", partition="gpu", time="1:00:00"))
    assert res.sbatch_args() == ["--nodes=1", "--ntasks-per-node=1", "--time=1:00:00", "--constraint=a100",
                                 "--partition=gpu", "--gpus-per-node=4"]


def test_settings_override_the_plan() -> None:
    res = plan_resources([{"accelerator": "h100"}], SlurmSettings(
        gpus="0", constraint="", nodes=2, ntasks_per_node=4, cpus_per_task=8, mem="64G", account="ml", qos="high",
        sbatch_args=("--exclusive", "--mail-type=END")))
    assert res.ntasks == 8
    assert res.sbatch_args() == ["--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=8", "--mem=64G",
                                 "--account=ml", "--qos=high", "--exclusive", "--mail-type=END"]
    assert plan_resources([], SlurmSettings(gres="gpu:a100:2", gpus="4")).sbatch_args()[-1] == "--gres=gpu:a100:2"
    assert plan_resources([], SlurmSettings()).sbatch_args() == ["--nodes=1", "--ntasks-per-node=1"]


@pytest.mark.parametrize(("options", "message"), [
    ({"mem": "lots"}, "slurm executor option mem='lots': use a size such as 16G or 4096M"),
    ({"time": "soon"}, "slurm executor option time='soon': use minutes or [days-]hours:minutes:seconds"),
    ({"nodes": "0"}, "slurm executor option nodes=0: use a whole number of at least 1"),
    ({"gpus": "two"}, "slurm executor option gpus='two': use a count or type:count"),
    ({"partition": "a b"}, "slurm executor option partition='a b': use a partition name"),
    ({"sbatch_args": "--output=/tmp/x"}, "sbatch_args='--output=/tmp/x': --output is set by the executor"),
    ({"sbatch_args": "exclusive"}, "sbatch_args='exclusive': give each as --key=value"),
    ({"gpu_request": "cards"}, "slurm executor option gpu_request='cards'"),
    ({"poll_s": "9"}, "poll_s=9.0, poll_max_s=5.0: use 0 < poll_s <= poll_max_s"),
    ({"nodez": "2"}, "unknown option 'nodez'; did you mean 'nodes'?"),
])
def test_bad_options_are_one_line_usage_errors_before_anything_is_submitted(
        cmx_home: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        engine.plan("demo,sort", executor="slurm", options=options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_sbatch_is_a_usage_error(cmx_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    with pytest.raises(UsageError, match=r"slurm executor: 'sbatch' is not on PATH; .*apt-get install slurm-client"):
        engine.plan("demo,sort", executor="slurm")


def test_cmx_plan_describes_the_job(cmx_home: Path) -> None:
    from cmx_slurm.executor import SlurmExecutor

    plan = engine.plan("demo,sort")
    described = SlurmExecutor().describe(execution_context(plan, SlurmSettings(ntasks_per_node=2, mem="1G")))
    assert described["tasks"] == 2 and described["sbatch"] == "--nodes=1 --ntasks-per-node=2 --mem=1G"


def test_the_far_command_setting_is_split_like_a_shell(cmx_home: Path, tmp_path: Path) -> None:
    from cmx_core.api import ExecutionRequest
    from cmx_slurm.executor import SlurmExecutor

    plan = engine.plan("demo,sort")
    context = execution_context(plan, SlurmSettings(cmx="'/opt/my env/bin/cmx' --quiet"))
    request = ExecutionRequest(context, run_dir=tmp_path, lock_path=tmp_path / "lock.json", run_id="x")
    assert SlurmExecutor().cmx_command(request) == ("/opt/my env/bin/cmx", "--quiet")
    plain = replace(request, context=replace(context, settings=SlurmSettings()))
    assert SlurmExecutor().cmx_command(plain) == (sys.executable, "-m", "cmx_core")


def test_the_task_script_quotes_everything_and_gives_other_ranks_their_own_output(tmp_path: Path) -> None:
    stage = tmp_path / "st age"
    stage.mkdir()
    out = str(tmp_path / "re$mote 'x'")
    command = (sys.executable, "-c", "import json, os, sys; print(json.dumps([sys.argv[1:], "
               "os.environ['CMX_DATA_DIR'], os.environ['LOCAL_RANK']]))", "--output", out, "--json")
    task = script.write(stage / script.TASK, script.task_script(command, {"CMX_DATA_DIR": "/d $HOME"}, stage))
    import json

    for rank, expected_out, data, extra in ((0, out, "/d $HOME", []),
                                            (1, out + "-rank-1", str(stage / "data-rank-1"), ["--no-cache"])):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)}
        proc = subprocess.run(["bash", str(task)], capture_output=True, text=True, env=env, check=True, timeout=60)
        argv, data_dir, local_rank = json.loads(proc.stdout)
        assert argv == ["--output", expected_out, "--json", *extra]
        assert data_dir == data and local_rank == str(rank)


def test_the_array_script_runs_the_task_of_its_index(tmp_path: Path) -> None:
    stages = [tmp_path / f"p {i}" for i in range(3)]
    for index, stage in enumerate(stages):
        stage.mkdir()
        script.write(stage / script.TASK, f"echo point {index} rank $RANK of $WORLD_SIZE\n")
    batch = script.write(tmp_path / "a.sh", script.array_script(stages, 1))
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_ID": "41", "SLURM_JOB_NODELIST": "nowhere",
           "RANK": "0"}
    subprocess.run(["bash", str(batch)], env=env, check=True, timeout=60, capture_output=True)
    assert (stages[2] / "slurm.out").read_text().strip() == "point 2 rank 0 of 1"
    assert (stages[2] / script.ENDED).read_text().split()[0] == "0"
    stamps = [float((stages[2] / name).read_text().split()[-1]) for name in (script.STARTED, script.LAUNCHED,
                                                                             script.ENDED)]
    assert stamps == sorted(stamps)  # started, then launched, then ended: what bench_scale.py reads
    assert not (stages[0] / script.ENDED).exists()


@pytest.mark.parametrize(("line", "state", "code"), [
    (COMPLETED, "completed", 0), (FAILED, "failed", 3), (TIMEOUT, "timeout", 0),
    (FAILED.replace("FAILED", "OUT_OF_MEMORY"), "oom", 3), (FAILED.replace("FAILED", "CANCELLED"), "cancelled", 3),
    (FAILED.replace("FAILED", "NODE_FAIL"), "lost", 3), (FAILED.replace("FAILED", "SOMETHING_NEW"), "lost", 3),
])
def test_slurm_states_map_onto_job_statuses(line: str, state: str, code: int) -> None:
    status = slurmcli.status_of(slurmcli.parse_show(line))
    assert status is not None and (status.state, status.exit_code) == (state, code)


def test_running_states_have_not_ended_and_a_forgotten_job_is_lost() -> None:
    for running in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
        assert slurmcli.status_of(slurmcli.parse_show(COMPLETED.replace("COMPLETED", running))) is None
    lost = slurmcli.status_of(None)
    assert lost is not None and lost.state == "lost" and "no longer knows" in lost.message
    timeout = slurmcli.status_of(slurmcli.parse_show(TIMEOUT))
    assert timeout is not None and timeout.message == "Slurm state TIMEOUT (TimeLimit), signal 15"


def test_the_poll_interval_grows_to_its_cap() -> None:
    backoff = Backoff(0.5, 2.0)
    asked = [t / 10 for t in range(0, 100) if backoff.due(t / 10)]
    assert asked == [0.0, 0.5, 1.3, 2.5, 4.2, 6.2, 8.2]  # intervals 0.5, 0.75, 1.125, 1.69, then 2.0 each


def test_an_ended_written_by_another_job_is_not_the_jobs_own(tmp_path: Path) -> None:
    """The batch script names the job that ended (the array's id for an array task): a lost
    attempt's late ``ended`` is not taken for its resubmission's, and a resubmission clears it."""
    stage = tmp_path / "p 0"
    stage.mkdir()
    script.write(stage / script.TASK, "true\n")
    batch = script.write(tmp_path / "a.sh", script.array_script([stage], 1))
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "40", "SLURM_JOB_ID": "41",
           "SLURM_JOB_NODELIST": "nowhere"}
    subprocess.run(["bash", str(batch)], env=env, check=True, timeout=60, capture_output=True)
    assert script.owned_by(stage, "40_0") and not script.owned_by(stage, "52_0")
    script.clear_marks(stage)
    assert not script.owned_by(stage, "40_0") and not (stage / script.STARTED).exists()
