"""The test bed itself (scripts/services/netbed.sh): its nodes are separate hosts on a private
network with no route off the machine, and stop removes exactly what start made."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from tests.netbed import bed as netbed
from tests.netbed.conftest import bed_work

OUTSIDE = "192.0.2.1"
"""An address off the machine (TEST-NET-1): no bed namespace may have a route to it."""


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)


def test_no_namespace_routes_off_the_machine(bed: netbed.Bed) -> None:
    for ns in bed.namespaces:
        routes = _ip("-n", ns, "route", "show", "table", "all")
        assert routes.returncode == 0, routes.stderr
        assert "default" not in routes.stdout, f"{ns} has a default route: {routes.stdout}"
        lookup = _ip("-n", ns, "route", "get", OUTSIDE)
        assert lookup.returncode != 0 and "unreachable" in lookup.stderr, f"{ns} routes {OUTSIDE}: {lookup.stdout}"
    for node in bed.nodes:
        routes = _ip("-n", node.netns, "-4", "route", "show").stdout.split("\n")
        assert [r.split()[0] for r in routes if r.strip()] == ["10.213.0.0/24"], routes


def test_the_addresses_exist_only_inside_the_bed(bed: netbed.Bed) -> None:
    host = _ip("-o", "addr", "show").stdout
    assert bed.nodes[0].address.rsplit(".", 1)[0] + "." not in host
    for node in bed.nodes:
        mine = _ip("-n", node.netns, "-o", "-4", "addr", "show", "dev", "eth0").stdout
        assert f"inet {node.address}/24" in mine
    hosts = [bed.run(node.index, ["hostname"]).stdout.strip() for node in bed.nodes]
    assert hosts == [node.hostname for node in bed.nodes]
    for node in bed.nodes:  # every node's name resolves on every node, to its bed address
        seen = bed.run(bed.nodes[-node.index].index, ["getent", "hosts", node.hostname]).stdout.split()
        assert seen == [node.address, node.hostname]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _mounted_under(work: Path) -> list[str]:
    lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    return [line.split()[4] for line in lines if line.split()[4].startswith(str(work))]


def test_stop_leaves_nothing_behind(bed: netbed.Bed) -> None:
    """A second bed beside the session's (three nodes, Slurm only) runs a job of its own; stop
    removes its namespaces, its UTS mounts and every process it started, and leaves the
    session's bed running."""
    work = bed_work()
    try:
        other = netbed.start(work, nodes=3, ray=False)
        try:
            assert other.token != bed.token
            assert not set(other.namespaces) & set(bed.namespaces)
            assert sorted(netbed.namespaces_named(other.token)) == sorted(other.namespaces)
            job = other.run(1, ["srun", "-N3", "hostname"], timeout=120)
            assert job.returncode == 0, job.stderr
            assert sorted(job.stdout.split()) == ["cmxn1", "cmxn2", "cmxn3"]
            pids = [pid for node in other.nodes for pid in netbed.pids_in(node.netns)]
            assert other.slurmctld_pid in pids and len(pids) >= 4  # slurmctld and a slurmd per node
            assert len(_mounted_under(work)) == 1 + 2 * 3  # the ns folder, a UTS and a mount namespace per node
        finally:
            netbed.stop(work)
        assert netbed.namespaces_named(other.token) == []
        assert _mounted_under(work) == []
        assert [pid for pid in (*pids, other.munged_pid, other.watch_pid) if _alive(pid)] == []
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert sorted(netbed.namespaces_named(bed.token)) == sorted(bed.namespaces)  # the other bed is untouched


def test_the_bed_stops_by_itself_when_its_owner_is_gone(bed: netbed.Bed) -> None:
    """A bed whose owner (here a `sleep` standing in for a test session) is killed before it
    stops the bed: the bed's watcher stops it, within a bounded wait."""
    work = bed_work()
    owner = subprocess.Popen(["sleep", "600"])
    try:
        other = netbed.start(work, nodes=1, ray=False, owner=owner.pid)
        assert netbed.namespaces_named(other.token) and _alive(other.watch_pid)
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (netbed.namespaces_named(other.token) or _alive(other.munged_pid)):
            time.sleep(0.5)
        assert netbed.namespaces_named(other.token) == [] and not _alive(other.munged_pid)
        assert _mounted_under(work) == []
        assert not _alive(other.slurmctld_pid)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        netbed.stop(work)  # nothing left to do when the watcher did its job
        shutil.rmtree(work, ignore_errors=True)
