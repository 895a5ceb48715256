"""Fixtures: a real Slurm (cmx_slurm.testing: the cluster SLURM_CONF names when it answers,
else a private single-node one this session starts with scripts/services/slurm.sh and stops
by PID)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_slurm.testing import Cluster, answers, start_private, stop_private, unavailable


@pytest.fixture(scope="session")
def slurm() -> Iterator[Cluster]:
    """A Slurm cluster for the session; SLURM_CONF is set while it lasts."""
    saved = os.environ.get("SLURM_CONF")
    if saved and answers(saved):
        yield Cluster(saved)
        return
    if os.geteuid() != 0 and not shutil.which("slurmctld"):
        unavailable("Slurm is not installed and this user cannot install it (apt-get install slurm-wlm munge)")
    work = Path(tempfile.mkdtemp(prefix="cmxslurm-"))
    try:
        cluster = start_private(work)
    except RuntimeError as exc:
        shutil.rmtree(work, ignore_errors=True)
        unavailable(str(exc))
        raise
    os.environ["SLURM_CONF"] = cluster.conf
    try:
        yield cluster
    finally:
        stop_private(cluster)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(work, ignore_errors=True)
