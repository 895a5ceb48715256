"""A rank killed from outside is named, with its own error (docs/faults.md, issue 44 item 4):
a 2-process torchrun training whose rank 1 this test kills by PID records ``error.cause:
killed``, ``signal: SIGKILL``, ``rank: 1`` and rank 1's own end in the evidence, not rank 0's
error about the peer it lost. The ranks run in the launch's own memory cgroup, where cmx can make one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cmx_core.api import validate_document
from cmx_core.api.sandboxing import open_group
from cmx_train.lost_rank import lost_rank

LIMIT_S = 240
"""Every bound of this test: the CLI, the launch (30 s less), the wait for rank 1 (60 s less)."""


def _rank_pid(home: Path, rank: int) -> int | None:
    """The worker process of ``rank`` of a run under ``home`` (its environment says both)."""
    wanted = {f"RANK={rank}".encode(), f"CMX_HOME={home}".encode()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            env = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if b"cmx_train.worker" in cmdline and wanted <= env:
            return int(entry.name)
    return None


def _memory_cgroup(pid: int) -> str:
    """The memory cgroup of ``pid`` (cgroup v1's ``memory`` line, else v2's ``0::`` line)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    v1 = [line.split(":", 2)[2] for line in lines if "memory" in line.split(":", 2)[1].split(",")]
    return v1[0] if v1 else next(line[3:] for line in lines if line.startswith("0::"))


def _cpu_s(pid: int) -> float:
    """CPU seconds ``pid`` used so far: a rank past its torch import and rendezvous is training."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_rank_killed_from_outside_is_named_with_its_own_error(home: Path) -> None:
    env = {**os.environ, "CMX_HOME": str(home), "CMX_TRAIN_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=train,throughput",
                             "--nproc=2", "--batch-size=32", "--steps=1000000", "--warmup-steps=0",
                             f"--timeout-s={LIMIT_S - 30}", "--json", "--no-telemetry"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + LIMIT_S - 60
        victim = None
        while time.monotonic() < deadline and proc.poll() is None:
            victim = _rank_pid(home, 1)
            if victim is not None and _rank_pid(home, 0) is not None and _cpu_s(victim) > 3.0:
                break
            time.sleep(0.2)
        assert victim is not None and proc.poll() is None, "rank 1 never started"
        probe = open_group()  # where cmx can make one, the ranks run in the launch's own memory cgroup
        if probe is not None:
            probe.close()
            assert _memory_cgroup(victim).startswith(_memory_cgroup(proc.pid) + "/cmx-sandbox-")
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    document = json.loads(Path(json.loads(out)["result_path"]).read_text())
    validate_document(document)
    error = document["error"]
    assert error["cause"] == "killed" and error["signal"] == "SIGKILL" and error["rank"] == 1, error
    assert f"rank 1 (pid {victim}) was killed by signal 9 (SIGKILL)" in error["message"], error
    [line] = error["evidence"]
    assert line == f"rank 1 was ended by signal 9 (SIGKILL): Signal 9 (SIGKILL) received by PID {victim}", error
    assert [(a["fault"], a["message"]) for a in document["attempts"]] == [("killed", error["message"])]


REPORT = """\
[W1205 22:00:00.000] Sending process 4242 closing signal SIGTERM
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
cmx_train.worker FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-05_22:00:01
  host      : box
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4243)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4243
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_22:00:01
  host      : box
  rank      : 0 (local_rank: 0)
  exitcode  : 3 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_torchruns_root_cause_is_not_taken_when_it_names_the_rank_that_lost_its_peer(tmp_path: Path) -> None:
    # torchrun's "first observed" is by the second it noticed: rank 0 (its gloo error, exit 3)
    # can be named for rank 1's kill; rank 0 wrote its own line, rank 1 had none to write
    (tmp_path / "error-rank-0.txt").write_text("RuntimeError: Connection closed by peer\n")
    lost = lost_rank(REPORT.replace("Sending process 4242", "Sending process 9999"), tmp_path)
    assert lost is not None and (lost.rank, lost.signal, lost.pid) == (1, 9, 4243)
    assert lost.error == "Signal 9 (SIGKILL) received by PID 4243"
    # a rank torchrun itself signalled is never the lost one
    signalled = REPORT.replace("exitcode  : 3 (pid: 4242)", "exitcode  : -15 (pid: 4242)")
    lost = lost_rank(signalled, tmp_path)
    assert lost is not None and lost.rank == 1
    assert lost_rank("no report here", tmp_path) is None
