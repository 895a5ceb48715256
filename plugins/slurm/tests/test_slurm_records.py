"""Every Slurm record true (docs/faults.md, "What Slurm recovers and what cmx records"), with
faults made from outside cmx on the loopback cluster: ``scontrol requeue`` of a running job,
``scontrol update nodename=... state=down`` under a running job array, and ``kill -9`` of
a sweep driver (by PID) then ``cmx sweep --resume``. Each check is on what the result says:
every point recorded exactly once and run once, a recovery Slurm made recorded as an
attempt, each point's wall time its own (starting no earlier than its task's first start,
which the batch script itself stamps) with its queue time beside it. Every wait is bounded;
no assertion depends on the machine's speed (the only time bounds are lower bounds that a
``sleep`` guarantees)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from cmx_core.testing.chaos import counter_recipe
from cmx_slurm import poll, worker
from cmx_slurm.testing import Cluster

BOUND_S = 300.0
SLEEPER = """\
name: test-slurm-records
tags: [test, slurmrecords]
summary: sleeps for its input, then prints it
cache: false
inputs:
  pause: {type: number, default: 0}
  n: {type: integer, default: 0}
outputs: [n]
steps:
  - uses: shell
    with:
      cmd: [sh, -c, 'sleep "$1"; echo "n=$2"', sh, "{{ inputs.pause }}", "{{ inputs.n }}"]
      parse: kv
"""
SLURM = ["--executor=slurm", "--executor-opt=poll_s=0.2"]


def _cmx(*args: str) -> list[str]:
    return [sys.executable, "-m", "cmx_core", *args]


def _squeue(*args: str) -> list[list[str]]:
    out = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, timeout=60, check=False).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def _until(predicate: Callable[[], Any], what: str, proc: subprocess.Popen[str] | None = None,
           timeout_s: float = 240.0, job: str | None = None) -> Any:
    """``predicate()``'s first true value, polled (bounded); an AssertionError naming ``what``
    (with what the controller says of ``job``, and cmx's stderr, when given)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"cmx ended (exit {proc.returncode}) before {what}: {err[-2000:]}")
        time.sleep(0.2)
    told = _told_of(job) if job else ""
    if proc is not None and job:
        proc.kill()
        told += f"\ncmx's stderr: {proc.communicate()[1][-3000:]}"
    raise AssertionError(f"{what} did not happen within {timeout_s:g} s; queue: {_squeue('-o', '%i %j %T %r')}{told}")


def _told_of(job: str) -> str:
    """What the controller, its log and its completion log say of ``job`` (a failure's context)."""
    shown = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=60,
                           check=False)
    lines = [f"scontrol: {shown.stdout.strip() or shown.stderr.strip()}"]
    logs = Path(os.environ.get("SLURM_CONF", "/nonexistent")).parent
    mentions = re.compile(rf"(JobId=|job ){job}\b")
    for name in ("slurmctld.log", "jobcomp.log"):
        try:
            text = (logs / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines += [f"{name}: {line}" for line in text.splitlines() if mentions.search(line)][-40:]
    return "\n" + "\n".join(lines)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _starts(stage: Path) -> list[float]:
    """The starts the batch script stamped itself, one per run of it."""
    return [float(line.split()[0]) for line in (stage / "starts").read_text().splitlines() if line.strip()]


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_job_slurm_requeued_records_the_lost_run_as_an_attempt(slurm: Cluster, cmx_home: Path,
                                                                 tmp_path: Path) -> None:
    """``scontrol requeue`` of a running single job (submitted with ``--requeue``: the policy
    retries lost nodes): Slurm runs it again by itself; the result is completed and says so
    (two attempts, the first lost, and a fault), its wall time counting both runs."""
    (tmp_path / "sleeper.yaml").write_text(SLEEPER)
    run = subprocess.Popen(_cmx("run", "--recipes", str(tmp_path), "--tags=test,slurmrecords", "--pause=4",
                                "--n=7", "--retries=1", "--retry-on=node_lost", *SLURM, "--json"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job = _until(lambda: next((r[0] for r in _squeue("-n", "cmx-test-slurm-records", "-t", "RUNNING",
                                                         "-o", "%i")), None), "the job running", run)
        stage = _until(lambda: next(iter(cmx_home.glob("data/**/remote-stage/started")), None),
                       "its batch script started", run).parent
        requeued_at = time.time()
        requeue = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60,
                                 check=False)
        assert requeue.returncode == 0, requeue.stderr
        _until(lambda: len(_starts(stage)) >= 2 or _release(job, stage, requeued_at), "the requeued job running again",
               run, job=job)
        out, err = _finish(run)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err[-2000:]
    document = json.loads(out)
    assert document["status"] == "completed" and document["outputs"] == {"n": "7"}
    runs = _starts(stage)
    assert len(runs) == 2  # the batch script ran twice: Slurm's own retry
    assert [(a["number"], a["step"], a["fault"]) for a in document["attempts"]] == \
        [(1, "slurm job", "node_lost"), (2, "slurm job", None)]
    assert "requeued" in document["attempts"][0]["message"]
    assert [f["class"] for f in document["faults"]] == ["node_lost"]
    assert _epoch(document["timing"]["started_at"]) <= runs[0] + 0.01  # the wall time counts the lost run too


def _release(job: str, stage: Path, requeued_at: float) -> bool:
    """Let a requeued job run now instead of after Slurm's requeue delay (its begin time),
    once it may: the lost run's processes are gone (slurmd has handled its end, which revokes
    the job's credential) and the clock is past the second of the requeue (a credential made
    in that second or before is refused as revoked: the job would end "non-startable"
    without running its script). False: keep waiting."""
    if time.time() < int(requeued_at) + 2 or _runs_in(stage.parent):
        return False
    subprocess.run(["scontrol", "update", f"jobid={job}", "starttime=now"], capture_output=True, text=True,
                   timeout=60, check=False)
    return False


def _runs_in(run_dir: Path) -> bool:
    """True while a process of the lost run lives (the far cmx: an argument of it names the run directory)."""
    inside = str(run_dir) + os.sep
    return any(any(arg.startswith(inside) for arg in process.info["cmdline"] or ())
               for process in psutil.process_iter(["cmdline"]))


def test_a_killed_drivers_pending_array_tasks_are_adopted_on_resume(slurm: Cluster, cmx_home: Path,
                                                                    tmp_path: Path) -> None:
    """A three-point sweep as one array run one task at a time (``-j 1``): its driver is
    SIGKILLed while the first task runs and the other two are pending. They run on by
    themselves; ``--resume`` adopts all three: each point is recorded once, in its first run
    directory, its far run made once, nothing marked interrupted, and each keeps its own wall
    time (at least its 3 s sleep) with its queue time beside it."""
    (tmp_path / "sleeper.yaml").write_text(SLEEPER)
    sweep = subprocess.Popen(_cmx("sweep", "--recipes", str(tmp_path), "--tags=test,slurmrecords", "--pause=3",
                                  "--matrix", "n=1,2,3", "-j", "1", *SLURM, "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: list(cmx_home.glob("data/sweeps/*/point-0/remote-stage/started")), "the first task", sweep)
        assert len(_squeue("-n", "cmx-sweep-test-slurm-records", "-t", "PENDING", "-r", "-o", "%i")) == 2
        os.kill(sweep.pid, signal.SIGKILL)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.communicate()
    folder = next(cmx_home.glob("data/sweeps/sw-*/sweep.json")).parent
    resumed = subprocess.run(_cmx("sweep", "--resume", folder.name, "--json"), capture_output=True, text=True,
                             timeout=BOUND_S, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    points = sorted(json.loads(resumed.stdout)["points"], key=lambda p: p["index"])
    assert [p["index"] for p in points] == [0, 1, 2]
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["point-0", "point-1", "point-2"]  # no -r1
    for index, point in enumerate(points):
        run_dir = folder / f"point-{index}"
        assert point["result_path"] == str(run_dir / "result.json")
        document = json.loads((run_dir / "result.json").read_text())
        assert document["status"] == "completed" and document["outputs"] == {"n": str(index + 1)}
        assert document.get("attempts", []) == []  # nothing was lost: not interrupted, not run again
        assert len(_starts(run_dir / "remote-stage")) == 1  # its task ran once
        assert point["wall_s"] >= 3.0 and document["timing"]["wall_s"] >= 3.0  # its own, not 0.0
        assert document["timing"]["queue_s"] >= 0.0
    third = json.loads((folder / "point-2" / "result.json").read_text())["timing"]
    assert third["queue_s"] >= 6.0  # -j 1: it waited for two 3 s sleeps (a lower bound), not in its wall time
    assert not list(cmx_home.glob("data/inflight/*.json"))


def test_a_retried_array_point_records_its_own_wall_time(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    """Both tasks of a two-point array lost with their node (``scontrol ... state=down``),
    resubmitted, and completed: each point is recorded once with its attempts, and its wall
    time starts no earlier than its task's first start (the batch script's own stamp), not
    at the array's submission; its queue time is recorded beside it."""
    (tmp_path / "sleeper.yaml").write_text(SLEEPER)
    sweep = subprocess.Popen(_cmx("sweep", "--recipes", str(tmp_path), "--tags=test,slurmrecords", "--pause=4",
                                  "--matrix", "n=1,2", "-j", "2", "--retries=1", "--retry-on=node_lost", *SLURM,
                                  "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: len(list(cmx_home.glob("data/sweeps/*/point-*/remote"))) >= 2, "both far runs", sweep)
        node = _squeue("-n", "cmx-sweep-test-slurm-records", "-t", "RUNNING", "-o", "%N")[0][0]
        down = subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=cmx test"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert down.returncode == 0, down.stderr
        worker.resume(node)
        out, err = _finish(sweep)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()
    assert sweep.returncode == 0, err[-2000:]
    for point in json.loads(out)["points"]:
        run_dir = Path(point["result_path"]).parent
        document = json.loads(Path(point["result_path"]).read_text())
        assert document["status"] == "completed"
        assert [(a["number"], a["fault"]) for a in document["attempts"]] == [(1, "node_lost"), (2, None)]
        runs = _starts(run_dir / "remote-stage")
        assert len(runs) == 2  # the task ran twice: once lost, once to its end
        assert _epoch(document["timing"]["started_at"]) >= runs[0] - 0.01  # from its own first start
        assert document["attempts"][0]["started"] >= runs[0] - 0.01
        assert document["timing"]["queue_s"] >= 0.0
        assert (run_dir / "remote-stage" / "ended.job").read_text().strip() == \
            json.loads((run_dir / "remote-stage" / "slurm-job.json").read_text())["array"]  # the retry's own end


WAITER = """\
name: test-slurm-waiter
tags: [test, slurmwaiter]
summary: waits (bounded) until the file its input names exists
cache: false
inputs:
  flag: {type: string, default: ""}
steps:
  - uses: shell
    with:
      cmd: [sh, -c, 'i=0; while [ ! -e "$1" ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done; test -e "$1"',
            sh, "{{ inputs.flag }}"]
"""


def test_a_task_lost_with_its_killed_slurmd_is_retried_and_recorded_as_succeeded(
        slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    """``kill -9`` of slurmd (by PID) past ``SlurmdTimeout``: Slurm sets the node down and
    ends the array task NODE_FAIL while its batch script runs on; cmx resubmits the task.
    The lost attempt then ends and writes its ``ended`` late; slurmd is started again and the
    retry runs: the point is recorded once, as succeeded, with the lost attempt and its fault
    (a stale ``ended`` must not be taken for the retry's)."""
    if len(slurm.pids) != 3 or slurm.work is None:
        pytest.skip("needs the Slurm this session started (its slurmd is killed): SLURM_CONF names a shared one")
    (tmp_path / "waiter.yaml").write_text(WAITER)
    flag = tmp_path / "go"
    conf = Path(slurm.conf)
    node = _squeue_node()
    sweep = subprocess.Popen(_cmx("sweep", "--recipes", str(tmp_path), "--tags=test,slurmwaiter",
                                  "--matrix", f"flag={flag}", "--retries=1", "--retry-on=node_lost", *SLURM, "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    restarted: int | None = None
    try:
        stage = _until(lambda: next(iter(cmx_home.glob("data/sweeps/*/point-0/remote")), None), "the far run",
                       sweep).parent / "remote-stage"
        first = json.loads((stage / "slurm-job.json").read_text())["array"]
        os.kill(slurm.pids[2], signal.SIGKILL)  # slurmd, by PID
        _until(lambda: _node_down(node), "the node set down by Slurm (SlurmdTimeout)", sweep)
        _until(lambda: json.loads((stage / "slurm-job.json").read_text())["array"] != first,
               "the lost task resubmitted", sweep)
        flag.touch()  # the lost attempt's batch script runs on to its end ...
        _until(lambda: (stage / "ended").exists() and (stage / "ended.job").read_text().strip() == first,
               "the lost attempt's late ended", sweep)
        late = time.monotonic()  # the retry stays pending (its node is down) past the poller's settle time:
        _until(lambda: time.monotonic() > late + poll.SETTLE_S + 2, "a wait past SETTLE_S", sweep)
        restarted = _start_slurmd(conf, node)  # ... and the retry can run once the node is back
        out, err = _finish(sweep)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()
        if restarted is not None:
            worker.resume(node)
    assert sweep.returncode == 0, err[-2000:]
    [point] = json.loads(out)["points"]
    document = json.loads(Path(point["result_path"]).read_text())
    assert document["status"] == "completed", document.get("error")
    assert [(a["number"], a["fault"]) for a in document["attempts"]] == [(1, "node_lost"), (2, None)]
    assert [f["class"] for f in document["faults"]] == ["node_lost"]
    assert len(list(cmx_home.glob("data/sweeps/*/point-0/result.json"))) == 1


def _squeue_node() -> str:
    return subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, timeout=60,
                          check=False).stdout.split()[0]


def _node_down(node: str) -> bool:
    state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True, timeout=60,
                           check=False).stdout.strip()
    return state.startswith("down")


def _start_slurmd(conf: Path, node: str) -> int:
    """slurmd again, as scripts/services/slurm.sh starts it; its PID (from its PID file)."""
    pidfile = conf.parent / "slurmd.pid"
    pidfile.unlink(missing_ok=True)
    subprocess.run(["slurmd", "-f", str(conf), "-N", node], capture_output=True, text=True, timeout=60, check=True)
    return int(_until(lambda: pidfile.exists() and pidfile.read_text().strip(), "slurmd's PID file", timeout_s=30))


COUNTER = counter_recipe("test-slurm-counter", "slurmcounter", to=12)


def test_a_resubmitted_array_task_resumes_from_its_checkpoint(slurm: Cluster, cmx_home: Path,
                                                              tmp_path: Path) -> None:
    """An array task whose step keeps a checkpoint is lost with its node after it counted to 3
    at least; its resubmission starts from the lost attempt's checkpoint
    (``remote-attempt-1/checkpoints``), not from 0, and its step sees ``CMX_ATTEMPT=2``."""
    (tmp_path / "counter.yaml").write_text(COUNTER)
    sweep = subprocess.Popen(_cmx("sweep", "--recipes", str(tmp_path), "--tags=test,slurmcounter", "--matrix", "x=1",
                                  "--retries=1", "--retry-on=node_lost", *SLURM, "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: any(int(p.read_text() or 0) >= 3 for p in cmx_home.glob(
            "data/sweeps/*/point-0/remote/checkpoints/*/count/progress")), "a count of 3 in the checkpoint", sweep)
        node = _squeue("-n", "cmx-sweep-test-slurm-counter", "-t", "RUNNING", "-o", "%N")[0][0]
        down = subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=cmx test"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert down.returncode == 0, down.stderr
        worker.resume(node)
        out, err = _finish(sweep)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()
    assert sweep.returncode == 0, err[-2000:]
    [point] = json.loads(out)["points"]
    document = json.loads(Path(point["result_path"]).read_text())
    assert document["status"] == "completed"
    assert document["outputs"]["attempt"] == "2" and int(document["outputs"]["start"]) >= 3  # counted on
    assert [(a["step"], a["number"], a["fault"], a["resumed"]) for a in document["attempts"]] == \
        [("slurm job", 1, "node_lost", False), ("slurm job", 2, None, False), ("count", 2, None, True)]
