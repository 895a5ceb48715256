"""torchrun across the test bed's 2 nodes (gloo, one process per node): cmx-train's own worker
trains a few steps, its two ranks on two hosts."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from cmx_train.config import TrainConfig
from tests.netbed import bed as netbed

PORT = "29517"


def test_torchrun_trains_across_two_nodes(bed: netbed.Bed, tmp_path: Path) -> None:
    config = TrainConfig(nodes=2, nproc=1, steps=4, warmup_steps=1, batch_size=32, threads_per_rank=1,
                         rdzv_timeout_s=120.0)
    config.write(tmp_path / "config.json")
    out = tmp_path / "out"
    out.mkdir()
    procs = []
    for node in bed.nodes[:2]:
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                f"--node-rank={node.index - 1}", f"--master-addr={bed.nodes[0].address}", f"--master-port={PORT}",
                "-m", "cmx_train.worker", str(tmp_path / "config.json"), str(out)]
        procs.append(bed.popen(node.index, argv, tmp_path / f"{node.hostname}.log", GLOO_SOCKET_IFNAME="eth0",
                               OMP_NUM_THREADS="1"))
    try:
        codes = [proc.wait(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    logs = {p.name: p.read_text(errors="replace")[-1500:] for p in tmp_path.glob("*.log")}
    assert codes == [0, 0], logs
    ranks = json.loads((out / "ranks.json").read_text(encoding="utf-8"))
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert sorted(r["host"] for r in ranks) == ["cmxn1", "cmxn2"]
    for rank in ranks:
        assert rank["samples"] > 0 and len(rank["losses"]) >= config.steps
        assert all(math.isfinite(loss) for loss in rank["losses"])
