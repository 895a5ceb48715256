"""cmx-core's launchers (torchrun, mpirun, env, none): what each turns one rank's command and
a rank layout into, and the one-line errors for a layout it cannot run."""

from __future__ import annotations

import pytest

from cmx_core.api import NodeCommand, RankLayout, UsageError
from cmx_core.plugins.loader import get_registry

COMMAND = ("/usr/bin/python3", "-m", "pkg.worker", "cfg.json")


def _wrap(name: str, layout: RankLayout) -> NodeCommand:
    return get_registry().launchers[name].wrap(COMMAND, layout)


def test_core_registers_four_launchers() -> None:
    launchers = get_registry().launchers
    assert {n: launchers[n].plugin for n in ("torchrun", "mpirun", "env", "none")} == dict.fromkeys(
        ("torchrun", "mpirun", "env", "none"), "cmx-core")
    assert not launchers["mpirun"].multi_node and launchers["torchrun"].multi_node


def test_torchrun_on_one_node_is_standalone() -> None:
    node = _wrap("torchrun", RankLayout(procs_per_node=4))
    assert node.argv[:3] == ("/usr/bin/python3", "-m", "torch.distributed.run")
    assert "--nproc-per-node=4" in node.argv and "--standalone" in node.argv
    assert node.argv[-3:] == ("-m", "pkg.worker", "cfg.json") and node.rendezvous.startswith("c10d standalone")


def test_torchrun_on_two_nodes_meets_at_master_port_plus_one() -> None:
    layout = RankLayout(nodes=2, procs_per_node=8, master_addr="job-0.svc", master_port=29500, job_id="j7",
                        rdzv_timeout_s=45)
    node = _wrap("torchrun", layout)
    assert {"--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=job-0.svc:29501",
            "--rdzv-id=j7", "--rdzv-conf=join_timeout=45"} <= set(node.argv)
    assert "--standalone" not in node.argv and node.rendezvous == "c10d job-0.svc:29501"


def test_env_runs_in_place_and_needs_the_executors_ranks() -> None:
    with pytest.raises(UsageError, match="launcher env needs RANK set by the executor"):
        _wrap("env", RankLayout(env={}))
    node = _wrap("env", RankLayout(master_addr="h", master_port=7, env={"RANK": "1", "WORLD_SIZE": "2",
                                                                         "SLURM_LOCALID": "1"}))
    assert node.argv == COMMAND and node.env == {"MASTER_ADDR": "h", "MASTER_PORT": "7", "LOCAL_RANK": "1"}


def test_none_and_mpirun_refuse_what_they_cannot_start() -> None:
    assert _wrap("none", RankLayout()).env == {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    with pytest.raises(UsageError, match="launcher none starts one process, but the layout has 2 ranks"):
        _wrap("none", RankLayout(procs_per_node=2))
    with pytest.raises(UsageError, match="launcher mpirun here runs on one node"):
        _wrap("mpirun", RankLayout(nodes=2))
    with pytest.raises(UsageError, match="launcher mpirun: no mpirun on PATH"):
        _wrap("mpirun", RankLayout(env={"PATH": "/nonexistent"}))
