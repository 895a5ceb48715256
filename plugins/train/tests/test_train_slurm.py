"""Two Slurm tasks that rendezvous: the loopback Slurm (cmx_slurm.testing: the cluster
SLURM_CONF names when it answers, else a private single-node one started here and stopped by
PID) runs ``train,throughput,nodes.2`` on its one node (``nodes=1``, ``ntasks_per_node=2``); each task's torchrun joins
the c10d rendezvous on the first host (MASTER_ADDR, port MASTER_PORT+1) and both ranks are
in the result. With ``env-ranks`` the two srun tasks are the ranks themselves (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the executor). Skipped where Slurm cannot run (the reason is printed)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

testing = pytest.importorskip("cmx_slurm.testing")


@pytest.fixture(scope="module")
def slurm() -> Iterator[Any]:
    saved = os.environ.get("SLURM_CONF")
    if saved and testing.answers(saved):
        yield testing.Cluster(saved)
        return
    if os.geteuid() != 0 and not shutil.which("slurmctld"):
        testing.unavailable("Slurm is not installed and this user cannot install it")
    work = Path(tempfile.mkdtemp(prefix="cmxtrain-slurm-"))
    try:
        cluster = testing.start_private(work)
    except RuntimeError as exc:
        shutil.rmtree(work, ignore_errors=True)
        testing.unavailable(str(exc))
        raise
    os.environ["SLURM_CONF"] = cluster.conf
    try:
        yield cluster
    finally:
        testing.stop_private(cluster)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize(("tags", "launcher", "rendezvous"), [
    ("train,throughput,nodes.2", "torchrun", "c10d "),      # one torchrun per task, --nnodes=2
    ("train,throughput,env-ranks,nodes.2", "env", "tcp://"),  # srun's tasks are the ranks
])
def test_two_slurm_tasks_rendezvous_on_the_first_host(slurm: Any, cli: Any, as_json: Any, tags: str, launcher: str,
                                                      rendezvous: str) -> None:
    proc = cli("run", "recipe", f"--tags={tags}", "--batch-size=32", "--steps=3",
               "--rdzv-timeout-s=60", "--timeout-s=180", "--executor", "slurm",
               "--executor-opt", "nodes=1", "--executor-opt", "ntasks_per_node=2", "--json",
               SLURM_CONF=os.environ["SLURM_CONF"])  # the loopback cluster's one node holds the 2 "nodes"
    assert proc.returncode == 0, proc.stderr
    result = as_json(proc)
    section = result["train"]
    assert result["status"] == "valid"
    assert section["launcher"] == launcher and section["nodes"] == 2 and section["world_size"] == 2
    assert section["rendezvous"].startswith(rendezvous)
    host, port = section["rendezvous"].removeprefix("tcp://").split()[-1].rsplit(":", 1)
    assert host == section["ranks"][0]["host"]  # the first (here: the only) host of the allocation
    assert 20000 <= int(port) <= 30000  # the Slurm executor's MASTER_PORT (20000 + job id % 10000), c10d's + 1
    assert [r["rank"] for r in section["ranks"]] == [0, 1] and all(r["samples"] == 48 for r in section["ranks"])
    assert result["metrics"]["samples_per_second_rank1"]["value"] > 0
