"""A Ray cluster of a head and worker nodes on this machine, all on 127.0.0.1, for the
kill-worker tests: Ray's own ``ray.cluster_utils.Cluster`` (each node its own raylet, as on
separate machines), run in this process so the tests can stop it by PID.

    python multinode.py TEMP_DIR WORKERS

prints one JSON line ``{"address": ...}`` once every node is up. Then each line ``add`` on
stdin adds a worker node (answered ``{"added": NODE_ID}``); end of input shuts the cluster
down. The head has no CPUs, so tasks go to the workers (1 CPU each), and the GCS marks a
node dead after 3 missed health checks 1 s apart (Ray's defaults are slower)."""

from __future__ import annotations

import json
import sys

from cmx_ray.cluster import ray_env

HEALTH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3,
          "health_check_initial_delay_ms": 1000}


def main(temp: str, workers: int) -> None:
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


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
