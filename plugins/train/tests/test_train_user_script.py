"""A user's own torchrun script, not shipped with cmx (written here, 30 lines of plain torch
DDP), run by ``cmx run recipe --tags=train,throughput --script=...`` with 1 and 2 processes:
cmx's samples/s and step time p50 agree within 2 % with what the script itself logs, every
rank's figures are in the result, the script is recorded by its digest, and the run is
unofficial for the script's own reason. A rank that aborts in the interpreter's teardown, a
script that never reports, and bad ``script`` values, are one-line errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SCRIPT = '''\
import json, os, statistics, sys, time
import torch, torch.distributed as dist
from cmx_train.report import report

steps, warmup, batch = (int(a) for a in sys.argv[1:4])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
model = torch.nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
times = []
for step in range(warmup + steps):
    t0 = time.perf_counter()
    x, y = torch.randn(batch, 64), torch.randint(0, 10, (batch,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    took = time.perf_counter() - t0
    report(samples=batch, step_time_s=took, loss=float(loss))
    if step == warmup - 1: start = time.perf_counter()
    if step >= warmup: times.append(took)
window = torch.tensor([time.perf_counter() - start]); dist.all_reduce(window, op=dist.ReduceOp.MAX)
slowest = torch.tensor(times); dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
if rank == 0:
    own = {"samples_per_second": world * batch * steps / window.item(),
           "step_time_p50_ms": statistics.median(slowest.tolist()) * 1e3}
    print("SCRIPT " + json.dumps(own), flush=True)
dist.destroy_process_group()
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)  # torch's gloo threads abort in the interpreter's teardown now and then (see the test below)
'''

TEARDOWN = '''\
import ctypes
from cmx_train.report import report

for step in range(6):
    report(samples=8, step_time_s=0.01)
ctypes.CDLL("libstdc++.so.6")._ZSt9terminatev()  # std::terminate(): what a running thread's destructor calls
'''


def _own_figures(home: Path, run_id: str) -> dict[str, float]:
    """What the script logged itself (rank 0's SCRIPT line in the launch log)."""
    log = next(home.glob(f"data/runs/*{run_id[:8]}*/**/train-launch.log"))
    line = next(x for x in log.read_text().splitlines() if "SCRIPT {" in x)
    own: dict[str, float] = json.loads(line.split("SCRIPT ", 1)[1])
    return own


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_users_own_script_is_measured_as_it_measures_itself(cli: Callable[..., Any], as_json: Any, home: Path,
                                                              tmp_path: Path, nproc: int) -> None:
    script = tmp_path / "my_train.py"
    script.write_text(SCRIPT)
    proc: subprocess.CompletedProcess[str] = cli(
        "run", "recipe", "--tags=train,throughput", f"--script={script}", "--script-args=40 3 32",
        f"--nproc={nproc}", "--warmup-steps=3", "--json", CMX_TRAIN_THREADS="1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = as_json(proc)
    own = _own_figures(home, result["run_id"])
    ours = result["metrics"]
    assert ours["samples_per_second"]["value"] == pytest.approx(own["samples_per_second"], rel=0.02)
    assert ours["step_time_p50_ms"]["value"] == pytest.approx(own["step_time_p50_ms"], rel=0.02)
    section = result["train"]
    assert [r["rank"] for r in section["ranks"]] == list(range(nproc))
    assert all(r["samples"] == 40 * 32 for r in section["ranks"])  # the timed steps only
    assert section["script"] == {"path": str(script.resolve()), "args": ["40", "3", "32"],
                                 "sha256": hashlib.sha256(script.read_bytes()).hexdigest()}
    assert section["threads"]["per_rank"] == 1  # read back from torch by the report helper
    assert result["benchmark"]["task"] == "my_train" and result["benchmark"]["division"] == "unofficial"
    assert section["unofficial_reasons"] == ["your own script my_train.py: not an MLPerf Training benchmark"]


def test_a_rank_that_aborts_in_teardown_fails_with_the_way_out(cli: Callable[..., Any], tmp_path: Path) -> None:
    """libstdc++'s own terminate handler, after every step was reported: the run is failed (the
    process did fail), and the line says what it was and how a script avoids it."""
    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN)
    proc = cli("run", "recipe", "--tags=train,throughput", f"--script={script}", "--warmup-steps=1", "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr.split("cmx: error:")[-1]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("cmx: error:"))
    assert "rank 0" in line and "SIGABRT" in line
    assert "aborted in the interpreter's teardown ('terminate called without an active exception'" in line
    assert "os._exit(0) after destroy_process_group()" in line


def test_a_script_that_never_reports_is_an_error_naming_the_helper(cli: Callable[..., Any], tmp_path: Path) -> None:
    script = tmp_path / "silent.py"
    script.write_text("print('training, but telling no one')\n")
    proc = cli("run", "recipe", "--tags=train,throughput", f"--script={script}", "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "rank 0 of the script reported 0 steps" in proc.stderr and "cmx_train.report.report" in proc.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["--script=/nonexistent/train.py"], "train: script '/nonexistent/train.py' is not a file"),
    (["--script=SELF", "--script-args=a 'b"], "train: script_args \"a 'b\": No closing quotation"),
    (["--script=SELF", "--nodes=2", "--launcher=env"], "train: script on several nodes runs under launcher torchrun"),
    (["--script=SELF", "--nodes=2"], "train: nodes 2, but nothing placed this step on one of 2 nodes"),
])
def test_bad_script_values_are_one_line_errors(cli: Callable[..., Any], tmp_path: Path, args: list[str],
                                               words: str) -> None:
    script = tmp_path / "t.py"
    script.write_text(SCRIPT)
    proc = cli("run", "recipe", "--tags=train,throughput", *(a.replace("SELF", str(script)) for a in args))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert words in proc.stderr
