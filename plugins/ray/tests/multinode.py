"""A Ray cluster of a head and worker nodes on this machine, all on 127.0.0.1, for the
kill-worker tests: Ray's own ``ray.cluster_utils.Cluster`` (each node its own raylet, as on
separate machines), run in this process so the tests can stop it by PID. Everything Ray writes
goes under the TEMP_DIR this side makes (``RAY_TMPDIR`` too), never the machine's /tmp/ray,
and so do its tasks' temporary files (``TMPDIR``: a task on a killed node never removes its own).

    python multinode.py TEMP_DIR WORKERS

prints one JSON line ``{"address": ...}`` once every node is up. Then each line ``add`` on
stdin adds a worker node (answered ``{"added": NODE_ID}``); end of input shuts the cluster
down. The head has no CPUs, so tasks go to the workers (1 CPU each), and the GCS marks a
node dead after 3 missed health checks 1 s apart (Ray's defaults are slower).

:func:`running` is the other side, for the tests' fixture and ``benchmarks/bench_faults.py``:
it starts this script in a process of its own and stops it, and what it left, by PID."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from cmx_ray.cluster import RAY_ENV, ray_env

HEALTH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3,
          "health_check_initial_delay_ms": 1000}


# What Ray puts below its temp dir for a unix socket, at most:
# /session_<date>_<time>_<usec>_<pid>/sockets/plasma_store.<n>
RAY_SOCKET_TAIL = 68
AF_UNIX_MAX = 107


def ray_temp_dir(prefix: str) -> str:
    """A new directory of this test's own for Ray's temp dir: under the tmp dir (``TMPDIR``)
    when Ray's unix sockets below it fit AF_UNIX's 107 bytes, else under /tmp (a private
    TMPDIR can be too deep). The caller removes it."""
    base = tempfile.gettempdir()
    if len(base) + 1 + len(prefix) + 8 + RAY_SOCKET_TAIL > AF_UNIX_MAX:
        base = "/tmp"
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def cluster_env(temp: str) -> dict[str, str]:
    """The environment of a test cluster in ``temp``: Ray's defaults (``RAY_TMPDIR``) and its
    tasks' temporary files (``TMPDIR``) there too, so removing ``temp`` removes all it made."""
    return {**os.environ, **RAY_ENV, "RAY_TMPDIR": temp, "TMPDIR": temp}


def main(temp: str, workers: int) -> None:
    # Ray's Cluster writes the head's address to <RAY_TMPDIR>/ray/ray_current_cluster (the
    # machine's /tmp/ray by default, which a machine that never ran Ray lacks, and where another
    # Ray's address may be) and removes it at shutdown: RAY_TMPDIR is ``temp`` (see running)
    Path(temp, "ray").mkdir(exist_ok=True)
    with ray_env():
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "temp_dir": temp, "node_ip_address": "127.0.0.1",
            "_system_config": HEALTH})
        for _ in range(workers):
            cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        print(json.dumps({"address": cluster.address}), flush=True)
        for line in sys.stdin:
            if line.strip() == "add":
                node = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
                print(json.dumps({"added": node.node_id}), flush=True)
        cluster.shutdown()


class Workers:
    """A running cluster: its address, and :meth:`add` for another worker node."""

    def __init__(self, process: subprocess.Popen[str], address: str) -> None:
        self.process, self.address = process, address

    def add(self) -> str:
        """Add a worker node (1 CPU); its node ID."""
        assert self.process.stdin is not None
        self.process.stdin.write("add\n")
        self.process.stdin.flush()
        return str(_answer(self.process, "added"))


def _answer(process: subprocess.Popen[str], key: str) -> object:
    """The next line of this script that is a JSON object with ``key`` (Ray may print other
    lines); None when it ended first."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("{"):
            value = json.loads(line)
            if key in value:
                return value[key]
    return None


@contextmanager
def running(workers: int = 2) -> Iterator[Workers]:
    """This cluster with ``workers`` worker nodes, in a private temp dir, for the block."""
    temp = ray_temp_dir("cmx-ray-nodes-")
    log = open(Path(temp) / "cluster.log", "w")  # noqa: SIM115 - kept open for the cluster's life
    process = subprocess.Popen([sys.executable, __file__, temp, str(workers)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=log, text=True,
                               env=cluster_env(temp))
    try:
        address = _answer(process, "address")
        if address is None:
            raise RuntimeError(f"the Ray cluster did not start: {(Path(temp) / 'cluster.log').read_text()[-2000:]}")
        yield Workers(process, str(address))
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        for pid in _mentioning(temp):  # what the cluster left behind, by PID
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def _mentioning(text: str) -> list[int]:
    """PIDs whose command line names ``text`` (this cluster's own session directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with suppress(OSError):
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
