"""The whole suite runs on pytest-xdist workers (#52 item 4): scripts/test.sh passes the worker
count and xdist's scope scheduler, and the root conftest.py keeps each test file on one worker
and the Ray, the Slurm and the Docker-engine tests each together on one (but for the container
tests that touch no shared image)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cmx_root_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("nodeid", "scope"), [
    ("plugins/ray/tests/test_ray_kill_worker.py::test_x", "ray"),
    ("plugins/ray/tests/test_ray_sweep.py::test_y[a-b]", "ray"),
    ("plugins/slurm/tests/test_slurm_units.py::test_z", "slurm"),
    ("plugins/train/tests/test_train_slurm.py::test_a", "slurm"),
    ("tests/test_registry_ci.py::test_plugin_stands_alone[cmx-slurm]", "slurm"),
    ("tests/test_registry_ci.py::test_plugin_stands_alone[cmx-ray]", "tests/test_registry_ci.py"),
    ("plugins/docker/tests/test_docker_build.py::test_w", "docker"),
    ("plugins/alebench/tests/test_alebench_toolchain.py::test_v", "docker"),
    ("plugins/alebench/tests/test_alebench_judge_image.py::test_v", "docker"),
    ("plugins/docker/tests/test_docker_first_run.py::test_f", "docker"),
    # container tests that use no image of the shared engine are scopes of their own
    ("plugins/docker/tests/test_docker_podman.py::test_p", "plugins/docker/tests/test_docker_podman.py"),
    ("plugins/docker/tests/test_docker_lockfile.py::test_l", "plugins/docker/tests/test_docker_lockfile.py"),
    ("tests/netbed/test_netbed_ray.py::test_a_task_runs_on_the_worker_node", "netbed"),
    ("plugins/alebench/tests/test_alebench_judge.py::test_u", "plugins/alebench/tests/test_alebench_judge.py"),
    ("plugins/mlperf/tests/test_mlperf_suite.py::test_t", "plugins/mlperf/tests/test_mlperf_suite.py"),
    ("tests/test_summary.py::test_numbers[1::2]", "tests/test_summary.py"),
])
def test_a_file_is_its_own_scope_unless_it_shares_a_service(nodeid: str, scope: str) -> None:
    assert _conftest().scope_of(nodeid) == scope


def test_the_long_groups_are_known_scopes_that_exist() -> None:
    conftest = _conftest()
    for scope in conftest.LONG_FIRST:
        assert scope in conftest.SHARED_SERVICE_GROUPS.values() or (ROOT / scope).is_file(), scope


def test_a_real_run_keeps_each_scope_on_one_worker() -> None:
    """Two workers over a core file and two Slurm files: every scope ran on exactly one worker."""
    files = ["tests/test_variation_names.py", "plugins/slurm/tests/test_slurm_resources.py",
             "plugins/slurm/tests/test_slurm_units.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--import-mode=importlib", "-p", "no:cacheprovider",
                           "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder", "-v", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTEST_ADDOPTS": ""})
    assert done.returncode == 0, done.stdout[-3000:]
    workers: dict[str, set[str]] = {}
    for worker, path in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|SKIPPED) (\S+?)::", done.stdout, re.MULTILINE):
        workers.setdefault(_conftest().scope_of(path + "::"), set()).add(worker)
    assert set(workers) == {"tests/test_variation_names.py", "slurm"}, done.stdout[-3000:]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers


def test_test_sh_runs_the_whole_list_on_workers_and_checks_the_count_first() -> None:
    text = (ROOT / "scripts" / "test.sh").read_text()
    assert 'workers=${CMX_TEST_WORKERS:-4}' in text
    assert 'parallel=(-n "$workers" --dist loadscope --no-loadscope-reorder)' in text
    assert text.index("workers=${CMX_TEST_WORKERS") < text.index("bash scripts/install.sh")   # before the install
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], env={**os.environ, "CMX_TEST_WORKERS": "four"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "scripts/test.sh: CMX_TEST_WORKERS is a whole number (0: none), not 'four'"]


def test_the_readme_says_how_the_suite_runs_and_how_long_it_takes() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "CMX_TEST_WORKERS" in readme and "4 pytest-xdist workers" in readme
    assert re.search(r"takes about \d+ min", readme), "the README says how long the test command takes"
