"""How the whole suite splits over pytest-xdist workers (``scripts/test.sh`` runs ``-n``).

Each test file stays on one worker (its module and session fixtures are built once), and the
files that share an outside service which two runs must not use at once go to one worker
together: the Ray tests (a session-wide head node, clusters whose processes the tests count),
the Slurm tests (one cluster of one node, whose free CPUs some tests assume), the tests that
build on the Docker engine's base image (one of them removes its tags to show a first run
rebuilding it), and the tests on the multi-node test bed (one bed of network namespaces for
the session: tests/netbed/conftest.py). The groups known to be long start first, so no worker
is left with one of them at the end while the others idle. Without xdist
(``CMX_TEST_WORKERS=0``) only the order changes.

(xdist's own ``--dist loadgroup`` marks a group by renaming test ids, which pytest 9 no longer
allows, so the grouping is a scheduler of its own here: xdist's file scheduler, fed our scopes.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cmx_core.plugins.loader import reset_registry
from cmx_core.results.compiled import DIR_ENV as VALIDATORS_DIR_ENV

# a folder or file of tests (relative to this file) -> the group all its files share; the first
# match decides, and None keeps a file a scope of its own: the container tests that touch no
# image of the shared engine (the Podman tests use a service of their own, the lock resolution
# no engine) run beside the Docker group, not in it. The first-run test stays in the group: it
# removes the base's tags from the shared engine for a while, and the group's main job then
# reuses the image that test built (one cpu-torch build; an engine of its own built it twice).
SHARED_SERVICE_GROUPS: dict[str, str | None] = {
    "plugins/ray/tests/": "ray",
    "plugins/slurm/tests/": "slurm",
    "plugins/docker/tests/test_docker_podman.py": None,
    "plugins/docker/tests/test_docker_lockfile.py": None,
    "plugins/docker/tests/": "docker",
    "plugins/alebench/tests/test_alebench_judge_image.py": "docker",
    "plugins/alebench/tests/test_alebench_toolchain.py": "docker",
    "tests/netbed/": "netbed",
    # the suite's Slurm outside its folder: the fault tests kill its slurmd and set its node down
    "plugins/train/tests/test_train_slurm.py": "slurm",
    "tests/test_registry_ci.py::test_plugin_stands_alone[cmx-slurm]": "slurm",
}
# scopes that take minutes, longest first, started first (longest-processing-time order), so the
# run does not end on one worker still busy with a long one while the others idle. Measured:
# wall seconds per scope at a load of 5 on 2 cores (CMX_TEST_TIMELINE and
# benchmarks/bench_suite_timeline.py, as CONTRIBUTING.md says); the rest follow in file order.
LONG_FIRST = ("docker", "tests/test_registry_ci.py", "slurm", "plugins/cm/tests/test_cm_vs_cm.py", "ray",
              "plugins/alebench/tests/test_alebench_rust_crates.py", "plugins/mlperf/tests/test_mlperf_peak_runs.py",
              "plugins/alebench/tests/test_alebench_import.py", "plugins/k8s/tests/test_k8s_fit.py", "netbed",
              "tests/test_telemetry_soak.py", "plugins/train/tests/test_train_correctness.py",
              "tests/test_sandbox_unprivileged.py", "plugins/cm/tests/test_cm_lifecycle.py",
              "plugins/train/tests/test_train_launchers.py", "tests/test_kit_mutations.py",
              "tests/test_json_parallel.py",
              "plugins/mlebench/tests/test_mlebench_cli.py", "plugins/k8s/tests/test_k8s_faults.py",
              "plugins/train/tests/test_train_max_batch.py", "plugins/docker/tests/test_docker_lockfile.py",
              "plugins/docker/tests/test_docker_podman.py", "plugins/train/tests/test_train_accuracy.py",
              "plugins/train/tests/test_train_models.py", "plugins/train/tests/test_train_sweep.py")


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its shared service's group, else its file. A key
    of :data:`SHARED_SERVICE_GROUPS` with ``::`` names one test (the registry CI's Slurm case)."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in SHARED_SERVICE_GROUPS.items():
        if (nodeid == prefix if "::" in prefix else path.startswith(prefix)):
            return group or path
    return path


def _rank(item: pytest.Item) -> int:
    scope = scope_of(item.nodeid)
    return LONG_FIRST.index(scope) if scope in LONG_FIRST else len(LONG_FIRST)


# what decides which plugins a registry loads (docs/environment.md), as the run was started
PLUGIN_SELECTION = {name: os.environ.get(name) for name in ("CMX_DISABLE_PLUGINS", "CMX_LOAD_PLUGINS",
                                                            "CMX_STRICT_PLUGINS")}


def _restore_plugin_selection() -> None:
    for name, value in PLUGIN_SELECTION.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    reset_registry()


@pytest.fixture(autouse=True, scope="module")
def each_file_gets_its_own_registry() -> Iterator[None]:
    """Each test file starts and ends with no plugin registry loaded and the plugin selection
    the run was started with: on a worker, files run one after another in an order that changes
    with the split, and a registry loaded under one file's selection (a plugin disabled
    in-process, a conformance registry of one plugin) must not reach the next file. (Session
    fixtures' own variables, such as the Docker tests' CMX_HOME, are left alone.)"""
    _restore_plugin_selection()
    yield
    _restore_plugin_selection()


def _is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (not: whether PYTEST_XDIST_WORKER is set, which
    a pytest that a test starts inherits from the worker running that test)."""
    return hasattr(config, "workerinput")


def _share_validators(config: pytest.Config) -> None:
    """The suite's runs share one directory of compiled result validators (derived only from
    the schema, the generator and the Python): most tests give each cmx a fresh ``CMX_HOME``,
    and each would compile them again (0.7 s of CPU a run, measured). The controller makes it;
    the workers and every cmx the tests start inherit it; tests of the compile unset it."""
    if os.environ.get(VALIDATORS_DIR_ENV) or _is_worker(config):
        return
    folder = tempfile.mkdtemp(prefix="cmx-validators-")
    os.environ[VALIDATORS_DIR_ENV] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C works in the tests however the suite was started. A shell starts a background job
    (``cmd &`` without job control) with SIGINT ignored, and an ignored signal is inherited
    through exec: every worker and every cmx a test starts would then ignore the SIGINT a
    test sends (seen: three Ctrl-C tests timed out in a run started that way). Python's own
    handler is put back here, in the controller and in each worker; the processes they start
    get the default action, as from a terminal. And the suite's validators directory is made."""
    _share_validators(config)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # stable: within a rank the collection order stays; every worker sorts the same way
    items.sort(key=_rank)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # the suite also runs without xdist (scripts/test-as-user.sh installs only pytest)
    LoadScopeScheduling = None


if LoadScopeScheduling is not None:

    class ServiceScopeScheduling(LoadScopeScheduling):  # type: ignore[misc,valid-type]
        """xdist's scope scheduler with :func:`scope_of` as the scope."""

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if LoadScopeScheduling is None or config.getoption("dist") not in ("load", "loadscope", "loadfile", "loadgroup"):
        return None
    return ServiceScopeScheduling(config, log)


# CMX_TEST_TIMELINE=FILE: each test appends one JSON line there (its scope, worker, wall span and
# the CPU seconds of its worker process and the subprocesses it waited for), so
# benchmarks/bench_suite_timeline.py can say which scope holds the run's critical path and
# where the CPU goes. Work done outside the worker's process tree (a Docker build in dockerd,
# a Slurm job) is in no test's CPU; the start and end lines hold the whole machine's.
# Only the run that was given the variable records: the pytest runs that tests start themselves
# inherit it, and are told apart by the recording process (the controller, or its workers).
if os.environ.get("CMX_TEST_TIMELINE") and not os.environ.get("CMX_TEST_TIMELINE_OWNER"):
    os.environ["CMX_TEST_TIMELINE_OWNER"] = str(os.getpid())
_OWNER = os.environ.get("CMX_TEST_TIMELINE_OWNER")
TIMELINE = os.environ.get("CMX_TEST_TIMELINE") if _OWNER in (str(os.getpid()), str(os.getppid())) else None


def _machine_cpu_s() -> float:
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()[1:]
    busy = sum(int(v) for i, v in enumerate(fields[:8]) if i not in (3, 4))  # not idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _timeline_line(record: dict[str, Any]) -> None:
    assert TIMELINE is not None
    with open(TIMELINE, "a", encoding="utf-8") as out:  # one short append per line: atomic
        out.write(json.dumps(record) + "\n")


def pytest_sessionstart(session: pytest.Session) -> None:
    if TIMELINE and not _is_worker(session.config):
        _timeline_line({"event": "start", "at": time.time(), "machine_cpu_s": _machine_cpu_s()})


def pytest_sessionfinish(session: pytest.Session) -> None:
    if TIMELINE and not _is_worker(session.config):
        _timeline_line({"event": "end", "at": time.time(), "machine_cpu_s": _machine_cpu_s()})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if not TIMELINE:
        yield
        return
    before, started = os.times(), time.time()
    yield
    after = os.times()
    _timeline_line({
        "event": "test", "nodeid": item.nodeid, "scope": scope_of(item.nodeid),
        "worker": getattr(item.config, "workerinput", {}).get("workerid", "main"), "start": started,
        "stop": time.time(),
        "cpu_s": round(after.user + after.system - before.user - before.system, 3),
        "children_cpu_s": round(after.children_user + after.children_system
                                - before.children_user - before.children_system, 3)})
