"""What Ray does with a task whose node is cut off from the head while the task lives on
(docs/faults.md, "What Ray recovers and what cmx records": fencing).

On a local cluster of a head without CPUs and two 1-CPU worker nodes, each its own raylet
(plugins/ray/tests/multinode.py), a task with ``max_retries=1`` waits for a file. The node
running it is stopped with SIGSTOP (``--freeze raylet``: its raylet only; ``node``: the raylet
and every process under it, the task's worker too), as a node whose link to the head is cut
looks from the head. Printed: how long until the GCS declared the node dead, whether Ray
started the task again within ``--wait-s``, and which run's result the driver got once the
node was let go (SIGCONT) and the task's file appeared.

    .venv/bin/python benchmarks/bench_ray_cut_node.py [--freeze node|raylet] [--wait-s 120] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from bench_faults import multinode  # the Ray test cluster's module, as bench_faults loads it

from cmx_ray.cluster import RAY_ENV


def _task(folder: str) -> int:
    """Stamp this run's start (Ray's number for it), then wait for its go-file; the number."""
    from ray._private.worker import global_worker

    number = int(global_worker.core_worker.get_current_task_attempt_number())  # type: ignore[attr-defined]
    Path(folder, f"start-{number}").write_text(str(os.getpid()))
    deadline = time.monotonic() + 600
    while not Path(folder, f"go-{number}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return number


def _dead(ray: Any, node_id: str) -> bool:
    return any(n["NodeID"] == node_id and not n["Alive"] for n in ray.nodes())


def measure(freeze: str, wait_s: float) -> dict[str, Any]:
    os.environ.update(RAY_ENV)
    import ray

    folder = tempfile.mkdtemp(prefix="cmx-bench-cut-")
    with multinode().running(2) as cluster:
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False,
                 configure_logging=False)
        try:
            ref = ray.remote(num_cpus=1, max_retries=1)(_task).remote(folder)
            while not Path(folder, "start-0").exists():
                time.sleep(0.1)
            worker = psutil.Process(int(Path(folder, "start-0").read_text()))
            raylet = next(p for p in worker.parents() if p.cmdline()[0].endswith("/raylet"))
            node_id = next(a.split("=", 1)[1] for a in raylet.cmdline() if a.startswith("--node_id="))
            frozen = [raylet, *(raylet.children(recursive=True) if freeze == "node" else [])]
            struck = time.monotonic()
            for process in frozen:
                process.send_signal(signal.SIGSTOP)
            declared_dead_s = retried_s = None
            while time.monotonic() - struck < wait_s and retried_s is None:
                if declared_dead_s is None and _dead(ray, node_id):
                    declared_dead_s = time.monotonic() - struck
                if Path(folder, "start-1").exists():
                    retried_s = time.monotonic() - struck
                time.sleep(0.2)
            for process in frozen:
                process.send_signal(signal.SIGCONT)
            for number in (0, 1):
                Path(folder, f"go-{number}").touch()
            try:
                got: Any = ray.get(ref, timeout=120)
            except Exception as exc:  # noqa: BLE001 - what the driver got is the measurement
                got = type(exc).__name__
        finally:
            ray.shutdown()
    return {"freeze": freeze, "declared_dead_s": declared_dead_s, "retried_within_s": retried_s,
            "wait_s": wait_s, "result_from_run": got}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freeze", choices=("node", "raylet"), default="node")
    parser.add_argument("--wait-s", type=float, default=120.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    row = measure(args.freeze, args.wait_s)
    if args.json:
        print(json.dumps(row))
        return 0
    dead = f"{row['declared_dead_s']:.1f} s" if row["declared_dead_s"] is not None else "not declared dead"
    retried = f"after {row['retried_within_s']:.1f} s" if row["retried_within_s"] is not None else \
        f"not within {row['wait_s']:g} s"
    result = row["result_from_run"]
    print(f"freeze {row['freeze']}: node declared dead: {dead}; task run again: {retried}; "
          f"result from run {result + 1 if isinstance(result, int) else result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
