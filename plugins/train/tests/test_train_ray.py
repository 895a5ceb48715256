"""On Ray: ``--executor ray`` (cmx-ray, a private local cluster) runs the plan as one Ray task,
and the launcher inside it (torchrun, 2 ranks) is unchanged: launcher and executor are
separate axes; ``nodes.2`` is a task on each of two Ray nodes. Skipped without cmx-ray."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import two_nodes_trained

RAY_ENV = pytest.importorskip("cmx_ray.cluster").RAY_ENV  # a driver of a 127.0.0.1 cluster runs with them


def test_torchrun_ranks_inside_a_ray_task(cli: Any, as_json: Any) -> None:
    proc = cli("run", "recipe", "--tags=train,throughput,nproc.2", "--batch-size=32", "--steps=3",
               "--executor", "ray", "--executor-opt", "num_cpus=2", "--executor-opt", "env=CMX_TRAIN_THREADS",
               "--json", timeout=400)
    assert proc.returncode == 0, proc.stderr
    result = as_json(proc)
    section = result["train"]
    assert result["status"] == "valid" and section["launcher"] == "torchrun"
    assert [r["rank"] for r in section["ranks"]] == [0, 1]
    assert "ray-job.json" in {a["path"] for a in result["artifacts"]}  # the Ray executor's own record


@pytest.fixture(scope="module")
def two_workers() -> Iterator[str]:
    """The address of a real local cluster of a head without CPUs and two 1-CPU worker nodes,
    each its own raylet (cmx-ray's tests' multinode.py), stopped by PID afterwards."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "ray" / "tests"))
    from multinode import running  # type: ignore[import-not-found]

    with running(2) as workers:
        yield str(workers.address)


def test_two_ray_nodes_train_with_a_rank_each(cli: Any, as_json: Any, home: Path, two_workers: str) -> None:
    """#45 item 5: ``nodes.2`` on Ray is a task on each of two nodes (a STRICT_SPREAD placement
    group; cmx_ray.nodeset) of a real local cluster of a head without CPUs and two 1-CPU worker
    nodes, each its own raylet (cmx-ray's tests' multinode.py): torchrun on each meets at
    node 0, and node 0's result holds both ranks."""
    proc = cli("run", "recipe", "--tags=train,throughput,nodes.2", "--batch-size=32", "--steps=3",
               "--threads-per-rank=1", "--rdzv-timeout-s=120", "--timeout-s=400", "--executor", "ray",
               "--executor-opt", f"address={two_workers}", "--executor-opt", "env=CMX_HOME",
               "--json", timeout=400, **RAY_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = as_json(proc)
    section = two_nodes_trained(result)
    assert section["rendezvous"].startswith("c10d 127.0.0.1:")
    run_dir = next(p for p in (home / "data" / "runs").iterdir() if result["run_id"] in p.joinpath("result.json")
                   .read_text(encoding="utf-8"))
    record = json.loads((run_dir / "ray-job.json").read_text(encoding="utf-8"))
    nodes = [record["node"], *record["other_nodes"]]
    assert len({n["node_id"] for n in nodes}) == 2, record  # each on a Ray node of its own

