"""The launcher is an axis of its own: torchrun, mpirun (Debian's OpenMPI) and a plain
process start the same worker, and the same configuration trains the same way under each
(the loss curves agree); the result says which launcher and rendezvous ran."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import UsageError
from cmx_core.testing import registered_launchers
from cmx_train.config import parse
from cmx_train.launch import plan_launch

LOSS_RTOL = 1e-4


def test_one_process_without_a_launcher_matches_torchrun(curve: Any) -> None:
    plain = curve(nproc=1, seed=3, launcher="none")
    torchrun = curve(nproc=1, seed=3, launcher="torchrun")
    assert plain["launcher"] == "none" and plain["rendezvous"] == "none"
    assert torchrun["launcher"] == "torchrun" and torchrun["rendezvous"].startswith("c10d standalone")
    assert plain["losses"] == torchrun["losses"]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Debian: apt-get install openmpi-bin)")
def test_mpirun_two_ranks_follow_torchrun(curve: Any) -> None:
    section = curve(nproc=2, seed=3, launcher="mpirun")
    ref = curve(nproc=2, seed=3, launcher="torchrun")
    assert section["launcher"] == "mpirun" and ref["launcher"] == "torchrun"
    assert [r["rank"] for r in section["ranks"]] == [0, 1]
    for a, b in zip(section["losses"], ref["losses"], strict=True):
        assert math.isclose(a, b, rel_tol=LOSS_RTOL)


def test_multi_node_torchrun_uses_c10d_on_master_addr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_ADDR", "node-a")
    monkeypatch.setenv("MASTER_PORT", "20007")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    launch = plan_launch(parse({"nodes": 2, "nproc": 8, "batch_size": 256}), tmp_path / "c.json", tmp_path,
                         registered_launchers())
    argv = list(launch.argv)
    assert "--nnodes=2" in argv and "--nproc-per-node=8" in argv and "--rdzv-backend=c10d" in argv
    assert "--rdzv-endpoint=node-a:20008" in argv and "--rdzv-id=7" in argv
    assert argv[argv.index("-m", 3) + 1] == "cmx_train.worker" and launch.rendezvous == "c10d node-a:20008"


def test_an_unregistered_launcher_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        plan_launch(parse({"launcher": "srun"}), tmp_path / "c.json", tmp_path, registered_launchers())
    assert str(err.value) == ("train: launcher 'srun' is not a registered launcher (known: env, mpirun, none, "
                              "torchrun)")
