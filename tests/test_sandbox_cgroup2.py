"""cgroup v2 for the sandbox (#36 items 2 and 3), tested honestly on a cgroup v1 machine.

* The controller files (``memory.max``, ``memory.swap.max``, ``pids.max``, ``cpuset.cpus``,
  ``cpu.max``; ``memory.peak``, ``memory.events``, ``cpu.stat``) against a v2 layout written
  from the kernel's documentation: ``tests/fixtures/cgroup2-v2-layout`` (see its README; this
  machine's unified hierarchy has no controllers, so they cannot be read here for real).
* What the unified mount beside v1 does have, for real (root): a run's group is made, a real
  process moved in through ``cgroup.procs``, ``cgroup.events`` says populated, ``cgroup.kill``
  ends it, the group is removed; and with no controller offered the caller is told each limit
  is missing (the watchdog path then bounds memory).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cmx_core.sandbox import cgroup2
from cmx_core.sandbox.bubblewrap import make_groups
from cmx_core.sandbox.cgroup2 import V2Groups

LAYOUT = Path(__file__).parent / "fixtures" / "cgroup2-v2-layout"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, V2Groups]:
    parent = tmp_path / "parent"
    shutil.copytree(LAYOUT / "parent", parent)
    group = V2Groups.create(("memory", "cpuacct", "pids", "cpuset"), parent=parent)
    assert group.dir is not None and group.dir.parent == parent
    shutil.copytree(LAYOUT / "group", group.dir, dirs_exist_ok=True)  # what the kernel would make in it
    return parent, group


def test_the_limits_go_to_the_v2_files(layout: tuple[Path, V2Groups]) -> None:
    parent, group = layout
    assert group.dir is not None and group.controllers == {"memory", "cpu", "pids", "cpuset"}
    assert (parent / "cgroup.subtree_control").read_text() == "+pids"  # each enabled in turn, the last kept
    assert group.set_memory(256 << 20) and group.set_processes(64) and group.set_cpus([2, 3])
    files = {name: (group.dir / name).read_text() for name in
             ("memory.max", "memory.swap.max", "pids.max", "cpuset.cpus", "cpu.max")}
    assert files == {"memory.max": str(256 << 20), "memory.swap.max": "0", "pids.max": "64",
                     "cpuset.cpus": "2,3", "cpu.max": "200000 100000"}
    assert group.has("memory") and group.has("pids") and group.has("cpuset") and group.has("cpuacct")
    assert group.kind == "cgroup-v2"


def test_the_measurements_come_from_the_v2_files(layout: tuple[Path, V2Groups]) -> None:
    _, group = layout
    assert group.peak_memory() == 301989888 and group.memory_usage() == 41943040
    assert group.oom_kills() == 1  # oom_kill in memory.events
    assert group.cpu_seconds() == pytest.approx(1.234567)  # usage_usec in cpu.stat
    assert group.forks_refused() == 3  # max in pids.events: forks refused, caught or not
    assert not group.populated() and group.pids() == []


def test_a_parent_that_offers_no_memory_controller_leaves_memory_to_the_fallback(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    shutil.copytree(LAYOUT / "parent", parent)
    (parent / "cgroup.controllers").write_text("cpu pids\n")
    group = V2Groups.create(("memory", "cpuacct", "pids"), parent=parent)
    assert group.controllers == {"cpu", "pids"} and not group.has("memory") and not group.set_memory(1 << 20)


def test_the_mounts_and_the_own_group_are_read_from_proc(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text("31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
                    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
    assert cgroup2.unified_mounts(info) == [Path("/sys/fs/cgroup/unified")]
    own = tmp_path / "cgroup"
    own.write_text("4:memory:/x\n0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n")
    assert cgroup2.own_path(own) == "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
    assert cgroup2.unified_mounts() and cgroup2.own_path() is not None  # this machine's, for real


@pytest.fixture
def unified() -> Path:
    """This machine's cgroup2 mount (beside v1) and this process's group in it, writable: root."""
    if os.geteuid() != 0:
        pytest.skip("making a group in the unified hierarchy needs root here (no delegated subtree)")
    mounts, own = cgroup2.unified_mounts(), cgroup2.own_path()
    if not mounts or own is None:
        pytest.skip("no cgroup2 hierarchy is mounted")
    parent = mounts[0] / own.lstrip("/")
    if not (parent / "cgroup.procs").exists():
        pytest.skip(f"{parent} is not this process's cgroup2 group")
    return parent


def test_a_real_group_on_the_unified_mount_holds_and_kills_a_process(unified: Path) -> None:
    group = V2Groups.create(("memory", "pids"), parent=unified)
    assert group.dir is not None and group.dir.is_dir()
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert group.add(proc.pid) == []
        assert group.pids() == [proc.pid] and group.populated()  # cgroup.procs, cgroup.events
        assert group.kill_all() == [proc.pid]  # cgroup.kill
        assert proc.wait(timeout=10) == -9 and not group.populated()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        made = group.dir
        group.remove()
    assert not made.exists()


def test_the_sandbox_prefers_v1_here_and_v2_names_its_mechanism(unified: Path) -> None:
    """On this hybrid host the v1 controllers win; the unified group alone offers no
    controller, so it never counts as a cgroup for a limit (the watchdog would bound memory)."""
    groups = make_groups(("memory", "cpuacct"))
    try:
        assert groups.kind == "cgroup" and groups.has("memory")
    finally:
        groups.remove()
    bare = V2Groups.create(("memory", "pids"), parent=unified)
    try:
        offered = set((unified / "cgroup.controllers").read_text().split())
        assert bare.controllers == {"memory", "pids"} & offered
        assert bare.has("memory") is ("memory" in offered) and bare.has("cpuacct")  # cpu.stat is always there
        started = time.monotonic()
        assert bare.kill_all() == [] and time.monotonic() - started < 1  # nothing in it: nothing to wait for
    finally:
        bare.remove()
