"""Fixtures: a real Slurm (the cluster SLURM_CONF names when it answers, else a private
single-node one this session starts with scripts/services/slurm.sh and stops by PID)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "services" / "slurm.sh"


@dataclass(frozen=True)
class Cluster:
    """A Slurm that answers: its config file and (when this session started it) the PIDs."""

    conf: str
    pids: tuple[int, ...] = ()
    work: Path | None = None


def unavailable(reason: str) -> None:
    """Skip with the reason; in CI (``CI`` set) a missing Slurm is a failure instead."""
    if os.environ.get("CI"):
        pytest.fail(f"Slurm required in CI: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(conf: str) -> bool:
    if not shutil.which("sinfo"):
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, "SLURM_CONF": conf})
    return proc.returncode == 0 and any(state in proc.stdout for state in ("idle", "mix", "alloc"))


def start_private(work: Path) -> Cluster:
    """Source the service script in bash and start a cluster under ``work`` on free ports."""
    driver = ('source "$1"; cmx_slurm_start "$2" || exit 3; '
              'echo "$SLURM_CONF $CMX_MUNGED_PID $CMX_SLURMCTLD_PID $CMX_SLURMD_PID"')
    env = {**os.environ, "CMX_SLURMCTLD_PORT": str(free_port()), "CMX_SLURMD_PORT": str(free_port())}
    env.pop("SLURM_CONF", None)
    proc = subprocess.run(["bash", "-c", driver, "driver", str(SCRIPT), str(work)], capture_output=True,
                          text=True, timeout=600, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cmx_slurm_start failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    conf, *pids = proc.stdout.split()
    return Cluster(conf, tuple(int(p) for p in pids), work)


def stop_private(cluster: Cluster) -> None:
    """cmx_slurm_stop with the PIDs this session's start printed."""
    munged, ctld, slurmd = cluster.pids
    driver = ('source "$1"; CMX_MUNGED_PID=$2 CMX_SLURMCTLD_PID=$3 CMX_SLURMD_PID=$4; cmx_slurm_stop')
    subprocess.run(["bash", "-c", driver, "driver", str(SCRIPT), str(munged), str(ctld), str(slurmd)],
                   capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="session")
def slurm() -> Iterator[Cluster]:
    """A Slurm cluster for the session; SLURM_CONF is set while it lasts."""
    saved = os.environ.get("SLURM_CONF")
    if saved and _answers(saved):
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
