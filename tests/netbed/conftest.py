"""Fixtures: one multi-node test bed (scripts/services/netbed.sh, 2 nodes with Slurm and Ray)
for the session, stopped by PID at its end. A machine that cannot make network namespaces
skips these tests with the reason; in CI (``CI`` set) that is a failure instead, and so is,
everywhere, a bed that does not start on a machine that can make one."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.netbed import bed as netbed


def unavailable(reason: str) -> None:
    """Skip with the reason; in CI (``CI`` set) a bed that cannot start is a failure instead."""
    if os.environ.get("CI"):
        pytest.fail(f"the multi-node test bed is required in CI: {reason}")
    pytest.skip(reason)


def bed_work() -> Path:
    """A fresh work directory with a short path (Ray's unix socket paths are limited)."""
    return Path(tempfile.mkdtemp(prefix="cmxnb-", dir="/tmp"))


@contextlib.contextmanager
def running_bed(ray: bool = True, nodes: int = 2, head_cpus: int = 1) -> Iterator[netbed.Bed]:
    """A running bed of ``nodes`` nodes (with Ray, its head with ``head_cpus`` CPUs, or Slurm
    only) for the block; stopped, everything it made removed, after it."""
    reason = netbed.why_not()
    if reason:
        unavailable(reason)
    work = bed_work()
    try:
        started = netbed.start(work, nodes=nodes, ray=ray, head_cpus=head_cpus)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        if (work / "netbed.env").exists():  # a start cut short by the timeout: remove what it made
            netbed.stop(work)
        shutil.rmtree(work, ignore_errors=True)
        # this machine can make namespaces and has the tools: a bed that does not start is a bug
        pytest.fail(str(exc))
    try:
        yield started
    finally:
        netbed.stop(work)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def bed() -> Iterator[netbed.Bed]:
    """A running 2-node bed; stopped (everything it made removed) when the session ends."""
    with running_bed() as started:
        yield started
