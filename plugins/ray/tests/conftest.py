"""A real Ray head for this test session: ``ray start --head --block`` on 127.0.0.1 with a
private temp dir, started here and stopped by its PID (never ``ray stop``, which stops
every Ray process on the machine), plus an isolated CMX_HOME per test."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from cmx_ray.cluster import RAY_ENV

from .multinode import Workers, cluster_env, ray_temp_dir, running

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains ``text`` (this session's own Ray processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def _stop(head: subprocess.Popen[bytes], temp: str) -> None:
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=30)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait()
    deadline = time.monotonic() + 30
    while (left := processes_mentioning(temp)) and time.monotonic() < deadline:
        for pid in left:  # what the head left behind, by PID
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


def _first_connection(address: str, deadline: float) -> None:
    """Connect once (the session keeps the connection): a head on a loaded machine listens
    before its GCS takes drivers, so a refused first connection is retried until the deadline."""
    from cmx_core.errors import UsageError
    from cmx_ray import cluster

    while True:
        try:
            with cluster.ray_env():
                cluster.connect(address)
            return
        except UsageError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


@pytest.fixture(scope="session", autouse=True)
def ray_variables() -> Iterator[None]:
    """The heads these tests start listen on 127.0.0.1 only (:data:`cmx_ray.cluster.RAY_ENV`,
    docs/infra), and a driver must run with the variables its head was started with: cmx sets
    none of them for a given address (it connects to any ``ray start`` cluster as its user's
    environment has it), so this session's environment, which each cmx it starts inherits,
    has them, as a user's shell on these machines does."""
    patch = pytest.MonkeyPatch()
    for key, value in RAY_ENV.items():
        patch.setenv(key, value)
    _AT_RAY_TESTS_END.append(patch.undo)
    yield
    patch.undo()  # a second undo does nothing


@pytest.fixture
def mentioning() -> Callable[[str], list[int]]:
    """:func:`processes_mentioning`, for tests that check what is left running."""
    return processes_mentioning


HERE = Path(__file__).resolve().parent
_AT_RAY_TESTS_END: list[Callable[[], None]] = []
"""What undoes the session fixtures of the Ray tests (the head, the variables), last made first."""


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The session's head stops, and Ray's variables leave the environment, when the Ray tests
    are done, not when the session ends: they run together on one worker (the root conftest's
    "ray" group), an idle head costs 6 % of a core (measured: 3.7 s of CPU a minute) for the
    rest of a run that needs every bit, and the files that run next on that worker must not
    inherit the variables (the Docker secret scan rightly took RAY_AUTH_MODE's value for one)."""
    del item
    if nextitem is not None and Path(nextitem.path).resolve().is_relative_to(HERE):
        return
    while _AT_RAY_TESTS_END:
        _AT_RAY_TESTS_END.pop()()


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """The address of a private Ray head (2 CPUs, no dashboard) for the Ray tests of the
    session (stopped after the last of them: :func:`pytest_runtest_teardown`)."""
    temp = ray_temp_dir("cmx-ray-test-")
    port = _free_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    log = open(Path(temp) / "head.log", "wb")  # noqa: SIM115 - kept open for the head's life
    head = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
        env=cluster_env(temp), stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            if head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray head did not start: {(Path(temp) / 'head.log').read_text()[-2000:]}")
            time.sleep(0.2)
        address = f"127.0.0.1:{port}"
        _first_connection(address, deadline)
        _AT_RAY_TESTS_END.append(lambda: _stop_head(head, temp, log))
        yield address
    finally:
        _stop_head(head, temp, log)


def _stop_head(head: subprocess.Popen[bytes], temp: str, log: IO[bytes]) -> None:
    """Stop the session's head by its PID and remove its files (a second call does nothing)."""
    if log.closed:
        return
    from cmx_ray import cluster

    cluster.disconnect()
    _stop(head, temp)
    log.close()
    shutil.rmtree(temp, ignore_errors=True)  # the head's session files (hundreds of MB over a suite)



@pytest.fixture(scope="module")
def ray_workers() -> Iterator[Workers]:
    """A head without CPUs and two worker nodes of 1 CPU, each its own raylet, on 127.0.0.1
    (:mod:`multinode`), for the tests that kill a worker node; stopped by PID afterwards."""
    with running(2) as workers:
        yield workers
