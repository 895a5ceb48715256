"""cmx's own Slurm executor on the test bed: ``cmx run ... --executor slurm --executor-opt
nodes=2`` submitted on node 1 trains with one rank on each node; the rendezvous is on the first
host of the allocation, by its name (the bed's hosts file names every node)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.netbed import bed as netbed


def test_a_cmx_run_on_two_slurm_nodes_has_a_rank_on_each(bed: netbed.Bed, tmp_path: Path) -> None:
    proc = bed.run(1, [sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=train,throughput,nodes.2",
                       "--batch-size=32", "--steps=3", "--rdzv-timeout-s=120", "--timeout-s=400", "--executor",
                       "slurm", "--executor-opt", "nodes=2", "--json"],
                   timeout=600, CMX_HOME=str(tmp_path / "home"), CMX_TRAIN_THREADS="1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    section = result["train"]
    assert result["status"] == "valid"
    assert section["nodes"] == 2 and section["world_size"] == 2
    assert sorted(r["rank"] for r in section["ranks"]) == [0, 1]
    assert sorted(r["host"] for r in section["ranks"]) == ["cmxn1", "cmxn2"]
    assert section["rendezvous"].split()[-1].rsplit(":", 1)[0] == "cmxn1"  # Slurm's first host, resolved by name
    assert all(r["samples"] > 0 for r in section["ranks"])
