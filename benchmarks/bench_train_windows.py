"""What running under cmx costs a training run's samples/s, measured inside one long run in
alternated windows, so that the machine's drift between whole runs (pairs of whole runs
spread ±25-50 % on the shared 2-core box: plugins/train/README.md, "Overhead") cancels out:

    .venv/bin/python benchmarks/bench_train_windows.py [--pairs 20] [--window 5] [--nproc 2] [--json]

The job is plain ``torchrun --nproc-per-node N`` of a data-parallel loop over cmx-train's
digits CNN (its model, data and batches, gloo, one thread a rank) that trains without a pause
and stamps each of rank 0's steps with the monotonic clock. What cmx adds while a training
run trains is switched on and off in windows of ``--window`` seconds in ABBA order (on, off,
off, on, ...): its run sampler (:class:`~cmx_core.telemetry.collector.RunTelemetry` at 1 Hz
over this process's tree, the ranks included, as ``cmx run`` samples a step) and every rank's
live series (:class:`cmx_train.progress.RankProgress` appending to the metrics file, as under
``cmx run``; each rank reports only while the window's flag file exists). The plan, the
launch and the result are outside the training's timed window under cmx, so they are not
measured here. A window's samples/s is the global batch times the steps rank 0 stamped in
it over its length; a pair's change is its on window against its off window. An on window
also pays the sampler's start and stop, so the figure is an upper bound on a steady one.

Prints the median change with its bootstrap 95 % interval, each arm's median samples/s, and
whether the interval lies within the 2 % goal. It also accounts for the CPU cmx's side used
while on, which does not drift with the machine's load: the sampler's CPU seconds (this
process, ``time.process_time``) and rank 0's time in its live-series calls, per second of the
on windows; their share of the ranks' cores bounds what cmx's side can take from ranks that
hold every core (``cpu_bound_pct``), leaving out cache and memory-bandwidth interference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

from bench_telemetry_windows import bootstrap_median, rates, sampled_windows, windows

GOAL_PCT = 2.0
JOB = """
import os, sys, time
from array import array
from pathlib import Path
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from cmx_train import models
from cmx_train.config import TrainConfig
from cmx_train.progress import RankProgress
from cmx_train.worker import Rank, batches

torch.set_num_threads(1)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
config = TrainConfig(nproc=world, batch_size=int(sys.argv[3]), seed=0)
data = models.data(config)
model, _ = models.build(config)
net = DistributedDataParallel(model)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
flag, out = Path(sys.argv[1]), sys.argv[2]
progress = RankProgress(os.environ["CMX_METRICS_FILE"], rank)
me, stamps, clock = Rank(rank, world, rank), array("d"), time.monotonic
deadline = float(Path(sys.argv[4]).read_text()) if rank == 0 else 0.0
go = torch.tensor([1])
epoch, reporting = 0, 0.0
while go.item():
    for idx in batches(config, me, len(data.train_y), epoch):
        t0 = clock()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(data.train_x[idx]), data.train_y[idx])
        loss.backward()
        opt.step()
        now = clock()
        if flag.exists():  # cmx's live series, on in the on windows only
            progress.step(len(idx), now - t0, lambda: float(loss.detach()))
            reporting += clock() - now
        if rank == 0:
            stamps.append(now)
            go[0] = int(now < deadline)
        dist.broadcast(go, 0)
        if not go.item():
            break
    epoch += 1
if rank == 0:
    with open(out, "wb") as f:
        stamps.tofile(f)
    Path(out + ".reporting").write_text(repr(reporting))
dist.destroy_process_group()
"""


def measure(pairs: int, window_s: float, nproc: int, batch_size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cmx-bench-train-windows-") as tmp:
        work = Path(tmp)
        script, out, flag, deadline = work / "job.py", work / "stamps.bin", work / "on", work / "deadline"
        script.write_text(JOB, encoding="utf-8")
        schedule = windows(pairs, window_s, time.monotonic() + 25.0)  # torch's import and the rendezvous first
        deadline.write_text(str(schedule[-1][3] + 0.5))
        env = {**os.environ, "CMX_METRICS_FILE": str(work / "metrics.txt"), "OMP_NUM_THREADS": "1"}
        job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
                                "--standalone", str(script), str(flag), str(out), str(batch_size), str(deadline)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        cpu_before = time.process_time()
        sampled_windows(schedule, work, flag)  # cmx's side on in the on windows
        sampler_cpu_s = time.process_time() - cpu_before
        try:
            _, err = job.communicate(timeout=300)
        finally:
            if job.poll() is None:
                job.kill()
        if job.returncode != 0:
            raise SystemExit(f"bench_train_windows: the job failed (exit {job.returncode}): {err.strip()[-800:]}")
        stamps: array[float] = array("d")
        stamps.frombytes(out.read_bytes())
        reporting_s = float(Path(f"{out}.reporting").read_text(encoding="utf-8"))
    if stamps[0] > schedule[0][2]:
        raise SystemExit("bench_train_windows: the training started after the first window; raise the lead time")
    by_pair = rates(stamps, schedule)
    changes = [100 * (p[True] - p[False]) / p[False] for p in by_pair.values()]
    low, high = bootstrap_median(changes)
    on = [p[True] * batch_size for p in by_pair.values()]
    off = [p[False] * batch_size for p in by_pair.values()]
    on_s = sum(end - begin for _, arm, begin, end in schedule if arm)
    return {"pairs": pairs, "window_s": window_s, "nproc": nproc, "global_batch": batch_size, "steps": len(stamps),
            "samples_per_s_on_median": round(statistics.median(on), 1),
            "samples_per_s_off_median": round(statistics.median(off), 1),
            "median_change_pct": round(statistics.median(changes), 3),
            "median_change_95ci_pct": [round(low, 3), round(high, 3)],
            "within_goal": low >= -GOAL_PCT and high <= GOAL_PCT,
            "cpu_bound_pct": round(100 * (sampler_cpu_s / on_s / nproc + reporting_s / on_s), 3),
            "sampler_cores_on": round(sampler_cpu_s / on_s, 5),
            "rank0_reporting_share_on": round(reporting_s / on_s, 6),
            "spread_off_pct": round(100 * (max(off) - min(off)) / statistics.median(off), 3),
            "load_1min": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20, help="on/off window pairs")
    parser.add_argument("--window", type=float, default=5.0, help="seconds a window")
    parser.add_argument("--nproc", type=int, default=2, help="ranks (processes)")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    if args.pairs < 2 or args.window < 1 or args.nproc < 1 or args.batch_size % args.nproc:
        parser.error("--pairs at least 2, --window at least 1 s, --batch-size divisible by --nproc")
    report = measure(args.pairs, args.window, args.nproc, args.batch_size)
    if args.json:
        print(json.dumps(report))
        return 0
    low, high = report["median_change_95ci_pct"]
    print(f"{report['nproc']} ranks, {report['pairs']} pairs of {report['window_s']:g} s windows: "
          f"{report['samples_per_s_on_median']:.1f} samples/s with cmx's side on vs "
          f"{report['samples_per_s_off_median']:.1f} off; median change {report['median_change_pct']:+.2f} % "
          f"(95 % interval {low:+.2f} .. {high:+.2f} %; goal within {GOAL_PCT:g} %: "
          f"{'met' if report['within_goal'] else 'not shown'}); off windows spread {report['spread_off_pct']:.1f} %; "
          f"load {report['load_1min']:.1f}")
    share = 100 * report["rank0_reporting_share_on"]
    print(f"CPU accounting while on: the sampler used {report['sampler_cores_on']:.4f} cores and rank 0's live "
          f"series {share:.3f} % of its time: at most {report['cpu_bound_pct']:.2f} % "
          f"of the {report['nproc']} ranks' CPU (a bound on the CPU cmx's side takes from them; cache and memory "
          "interference are not in it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
