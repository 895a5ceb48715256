"""The recipe's ``resources:`` through the slurm executor: each key becomes the sbatch
argument docs/recipes.md's table says, the settings override it, and ``nodes: 2`` run on
the one-node test cluster (``nodes=1`` places both ranks there) launches 2 tasks through
srun with the rendezvous variables."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from cmx_core.testing.runs import engine
from cmx_slurm.executor import resources_for
from cmx_slurm.settings import SlurmSettings
from cmx_slurm.testing import Cluster
from tests.test_recipe_resources import doc_mapping, doc_recipe, write_recipe

TWO_NODES = """\
name: test-slurm-two-nodes
tags: [test, slurm, twonodes]
summary: a two-node recipe; each rank writes the rendezvous variables it got
inputs:
  out_dir: {type: string}
resources: {nodes: 2, time: 5m}
steps:
  - uses: shell
    measures: true
    with:
      cmd: [sh, -c,
            'env | grep -E "^(MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK)=" | sort >"$0/rank-$RANK.env"',
            "{{ inputs.out_dir }}"]
      env_allow: [MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK]
"""


def test_each_key_becomes_the_documented_sbatch_argument(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe())
    args = resources_for(engine.plan("train,tiny", recipes_dirs=[tmp_path]), SlurmSettings()).sbatch_args()
    for key, cell in doc_mapping("Slurm").items():
        if key != "Key":
            documented = re.findall(r"`([^`]+)`", cell)
            assert documented and documented[0] in args, (key, cell, args)
    big = resources_for(engine.plan("train,tiny,big", recipes_dirs=[tmp_path]), SlurmSettings()).sbatch_args()
    assert "--gres=gpu:8" in big and "--cpus-per-task=8" in big


def test_settings_override_the_recipe(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe())
    plan = engine.plan("train,tiny", recipes_dirs=[tmp_path])
    args = resources_for(plan, SlurmSettings(gpus="2", mem="8G", time="10", constraint="a100",
                                             cpus_per_task=2)).sbatch_args()
    assert args == ["--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=2", "--mem=8G", "--time=10",
                    "--constraint=a100", "--gres=gpu:2"]
    placed = resources_for(plan, SlurmSettings(nodes=1))
    assert placed.ntasks == 2 and placed.sbatch_args()[:2] == ["--nodes=1", "--ntasks=2"]  # ranks kept
    chosen = resources_for(plan, SlurmSettings(nodes=1, ntasks_per_node=3))
    assert chosen.ntasks == 3 and chosen.sbatch_args()[:2] == ["--nodes=1", "--ntasks-per-node=3"]


def test_nodes_2_launches_two_ranks_with_the_rendezvous_variables(slurm: Cluster, cmx_home: Path,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    out.mkdir()
    run = engine.run_tags("test,slurm,twonodes", {"out_dir": str(out)}, recipes_dirs=[write_recipe(tmp_path / "r",
                                                                                          TWO_NODES).parent],
                     executor="slurm", options={"nodes": "1", "poll_s": "0.2"})
    assert run.document["status"] == "completed"
    record = json.loads((run.run_dir / "remote-stage" / "slurm-job.json").read_text())
    assert record["tasks"] == 2 and "--ntasks=2" in record["sbatch"] and "--time=5" in record["sbatch"]
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    port = str(20000 + int(record["job_id"]) % 10000)
    for rank in (0, 1):
        env = dict(line.split("=", 1) for line in (out / f"rank-{rank}.env").read_text().split())
        assert env == {"MASTER_ADDR": host, "MASTER_PORT": port, "WORLD_SIZE": "2", "RANK": str(rank),
                       "LOCAL_RANK": str(rank)}
    assert (run.run_dir / "remote-rank-1" / "result.json").is_file()  # rank 1 ran the same plan
