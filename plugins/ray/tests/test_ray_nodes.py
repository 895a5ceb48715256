"""A recipe asking for ``nodes: 2`` on a real local cluster of a head without CPUs and two
1-CPU worker nodes, each its own raylet (tests/multinode.py): a task on each node
(cmx_ray.nodeset), each told its node rank; when node 1's run fails while node 0's still
runs, the run ends with node 1's error at once, not at node 0's timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .multinode import Workers

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
