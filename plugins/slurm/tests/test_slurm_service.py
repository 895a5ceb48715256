"""scripts/services/slurm.sh: a private single-node Slurm starts, runs a job, listens on
loopback only, and stops by PID."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cmx_slurm.testing import Cluster, start_private, stop_private, unavailable


def _listening(pids: tuple[int, ...]) -> list[str]:
    """The local addresses the given processes listen on (TCP), from ss."""
    proc = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, timeout=30, check=True)
    return [line.split()[3] for line in proc.stdout.splitlines() if any(f"pid={p}," in line for p in pids)]


def test_the_service_script_starts_a_cluster_that_runs_jobs_and_stops_it_by_pid() -> None:
    if os.geteuid() != 0 and not shutil.which("slurmctld"):
        unavailable("Slurm is not installed and this user cannot install it")
    work = Path(tempfile.mkdtemp(prefix="cmxslurm-svc-"))
    cluster: Cluster | None = None
    try:
        cluster = start_private(work)
        assert cluster.conf == str(work / "slurm.conf") and len(cluster.pids) == 3
        env = {**os.environ, "SLURM_CONF": cluster.conf}
        conf = Path(cluster.conf).read_text()
        assert f"StateSaveLocation={work}/state" in conf and "NoCtldInAddrAny" in conf
        ran = subprocess.run(["srun", "-n", "2", "-l", "hostname", "-s"], capture_output=True, text=True,
                             timeout=120, check=False, env=env)
        assert ran.returncode == 0, ran.stderr
        host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
        assert sorted(ran.stdout.split()) == sorted(["0:", "1:", host, host])
        addresses = _listening(cluster.pids)
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses
    finally:
        if cluster is not None:
            stop_private(cluster)
            for pid in cluster.pids:
                assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        shutil.rmtree(work, ignore_errors=True)
