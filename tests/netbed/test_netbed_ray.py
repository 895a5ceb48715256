"""Ray on the test bed: a head on node 1, a worker on node 2; a task pinned to the worker runs
on a host and a Ray node other than the head's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.netbed import bed as netbed

DRIVER = '''
import json, socket, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(address=sys.argv[1], logging_level="ERROR")
head_ip, worker_ip = sys.argv[2], sys.argv[3]
deadline = time.monotonic() + 60
while True:  # the worker's `ray start` returned; its raylet shows as alive in a moment
    alive = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}
    if worker_ip in alive or time.monotonic() > deadline:
        break
    time.sleep(0.2)

@ray.remote(num_cpus=1)
def where():
    return socket.gethostname(), ray.get_runtime_context().get_node_id()

pinned = NodeAffinitySchedulingStrategy(node_id=alive[worker_ip], soft=False)
host, node = ray.get(where.options(scheduling_strategy=pinned).remote(), timeout=120)
print(json.dumps({"driver_host": socket.gethostname(), "nodes": alive, "task_host": host, "task_node": node}))
'''


def test_a_task_runs_on_the_worker_node(bed: netbed.Bed, tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER, encoding="utf-8")
    head, worker = bed.nodes[0], bed.nodes[1]
    proc = bed.run(1, [sys.executable, str(script), bed.ray_address, head.address, worker.address], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(seen["nodes"]) == [head.address, worker.address], seen
    assert seen["driver_host"] == head.hostname
    assert seen["task_host"] == worker.hostname
    assert seen["task_node"] == seen["nodes"][worker.address] != seen["nodes"][head.address]
