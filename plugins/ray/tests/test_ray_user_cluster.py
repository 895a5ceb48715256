"""cmx joins any Ray cluster a user started with ``ray start`` (#44 item 5): a head started the
ordinary way, with none of Ray's variables, advertises the machine's own address, and cmx,
given ``--executor-opt address=...``, sets none of Ray's variables either
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` made its driver look for the node on 127.0.0.1 and
fail after a minute). The cluster and the run are in a network namespace of their own
(:mod:`usercluster`), so the head, which listens on every address it has, is reachable from
nowhere else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .multinode import ray_temp_dir
from .usercluster import NODE_IP

HELPER = Path(__file__).with_name("usercluster.py")


def _in_namespace(work: str) -> dict[str, object]:
    """:mod:`usercluster` in a new network namespace; its report (skips when none can be made)."""
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) to make a network namespace")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a user's shell: no Ray variables
    proc = subprocess.run([unshare, "--net", "--fork", sys.executable, str(HELPER), work], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode == 77 or "unshare failed" in proc.stderr:
        pytest.skip(f"no network namespace here: {proc.stderr.strip().splitlines()[-1:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_a_run_on_a_cluster_started_with_ray_start(cmx_home: Path) -> None:
    work = ray_temp_dir("cmx-ray-user-")
    try:
        report = _in_namespace(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert report["node_ip"] == NODE_IP  # the head is where an ordinary ray start puts it, not on 127.0.0.1
    assert report["left"] == []  # the head and all it started were stopped by PID
    assert report["rc"] == 0, report["stderr"]
    document = json.loads(str(report["stdout"]))
    assert document["status"] in ("valid", "completed")
    [job_file] = list(cmx_home.rglob("ray-job.json"))
    job = json.loads(job_file.read_text())
    assert job["cluster"] == report["address"] and job["exit_code"] == 0 and job["node"]["node_id"]
