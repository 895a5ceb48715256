"""A recipe asking for ``nodes: 2`` on a real local cluster of a head without CPUs and two
1-CPU worker nodes, each its own raylet (tests/multinode.py): a task on each node
(cmx_ray.nodeset), each told its node rank; when node 1's run fails while node 0's still
runs, the run ends with node 1's error at once, not at node 0's timeout; a lost node's run is
retried whole by cmx's policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .multinode import Workers, running

ON_TWO_NODES = """\
name: test-ray-nodes
tags: [test, ray, nodes]
summary: a step on each of two nodes; node 1's fails, node 0's would sleep for ten minutes
resources: {nodes: 2}
steps:
  - uses: shell
    with:
      cmd: [sh, -c, 'if [ "$CMX_NODE_RANK" = 1 ]; then echo "node 1 gives up" >&2; exit 3; fi; sleep 600']
      env_allow: [CMX_NODE_RANK]
"""


def test_a_failed_node_ends_the_run_with_its_error(ray_workers: Workers, cmx_home: Path, tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(ON_TWO_NODES, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "--recipes", str(tmp_path), "--tags",
                           "test,ray,nodes", "--executor=ray", f"--executor-opt=address={ray_workers.address}",
                           "--executor-opt=env=CMX_HOME", "--json"],
                          capture_output=True, text=True, timeout=300, check=False, env=dict(os.environ))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "node 1's run failed" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]


BOTH_SLEEP = """\
name: test-ray-nodes-sleep
tags: [test, ray, nodes, sleep]
summary: a step on each of two nodes, each sleeping a while
resources: {nodes: 2}
steps:
  - uses: shell
    with: {cmd: [sleep, "15"]}
"""


def test_a_lost_node_is_retried_whole_by_the_policy(cmx_home: Path, tmp_path: Path) -> None:
    """Ray does not run a node's task again (``max_retries=0``), so a lost node's run is cmx's
    to retry: node 0's raylet killed (``--inject kill-worker``) on a cluster of three worker
    nodes, the run is lost (``node_lost``) and run again whole on the two left."""
    (tmp_path / "nodes.yaml").write_text(BOTH_SLEEP, encoding="utf-8")
    with running(3) as workers:
        proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "--recipes", str(tmp_path), "--tags",
                               "test,ray,nodes,sleep", "--retries=1", "--retry-on=node_lost", "--inject=kill-worker",
                               "--executor=ray", f"--executor-opt=address={workers.address}",
                               "--executor-opt=env=CMX_HOME", "--json"],
                              capture_output=True, text=True, timeout=400, check=False, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads(proc.stdout)
    assert [(a["number"], a["fault"], a["injected"]) for a in document["attempts"]][:1] == [
        (1, "node_lost", "kill-worker")], document["attempts"]
    assert document["attempts"][-1]["fault"] is None and len(document["attempts"]) == 2
