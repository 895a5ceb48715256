"""Test helpers for code that needs a real Slurm: use the cluster ``SLURM_CONF`` names when it
answers, else start a private single-node one with ``scripts/services/slurm.sh`` (found in
the checkout, or where ``CMX_SLURM_SERVICE_SCRIPT`` says) and stop it by PID.

cmx-slurm's own tests use it from their ``conftest.py``; a plugin that builds on cmx-slurm
can do the same."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(os.environ.get("CMX_SLURM_SERVICE_SCRIPT")
              or Path(__file__).resolve().parents[4] / "scripts" / "services" / "slurm.sh")
"""The service script (the checkout's, for an editable install)."""


@dataclass(frozen=True)
class Cluster:
    """A Slurm that answers: its config file and (when this session started it) the PIDs."""

    conf: str
    pids: tuple[int, ...] = ()
    work: Path | None = None


def unavailable(reason: str) -> None:
    """Skip with the reason; in CI (``CI`` set) a missing Slurm is a failure instead."""
    import pytest  # deferred: pytest only when this runs (182 modules)

    if os.environ.get("CI"):
        pytest.fail(f"Slurm required in CI: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for the private cluster's daemons)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(conf: str, patience_s: float = 60.0) -> bool:
    """True when the cluster of ``conf`` has a usable node, asked again for ``patience_s``: on
    a loaded machine slurmctld can time out a query, and a node another test set down and
    resumed takes a moment to be idle again; neither means there is no cluster."""
    if not shutil.which("sinfo"):
        return False
    deadline = time.monotonic() + patience_s
    while True:
        try:
            proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30,
                                  check=False, env={**os.environ, "SLURM_CONF": conf})
            if proc.returncode == 0 and any(state in proc.stdout for state in ("idle", "mix", "alloc")):
                return True
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(2.0)


def start_private(work: Path) -> Cluster:
    """Source the service script in bash and start a cluster under ``work`` on free ports."""
    if not SCRIPT.is_file():
        raise RuntimeError(f"no service script at {SCRIPT} (an installed cmx-slurm has none): start a Slurm and "
                           "set SLURM_CONF, or set CMX_SLURM_SERVICE_SCRIPT to a checkout's scripts/services/slurm.sh")
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
    """cmx_slurm_stop with the PIDs this session's start printed; slurmd's from its PID file
    when a test killed it and started it again (a fault test does)."""
    munged, ctld, slurmd = cluster.pids
    slurmd = _restarted_slurmd(Path(cluster.conf).parent / "slurmd.pid") or slurmd
    driver = ('source "$1"; CMX_MUNGED_PID=$2 CMX_SLURMCTLD_PID=$3 CMX_SLURMD_PID=$4; cmx_slurm_stop')
    subprocess.run(["bash", "-c", driver, "driver", str(SCRIPT), str(munged), str(ctld), str(slurmd)],
                   capture_output=True, text=True, timeout=120, check=False)


def _restarted_slurmd(pidfile: Path) -> int | None:
    """The PID in slurmd's PID file when that process is a live slurmd, else None."""
    try:
        pid = int(pidfile.read_text(encoding="utf-8").strip())
        name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    return pid if name == "slurmd" else None
