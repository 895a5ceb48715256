"""On Ray: ``--executor ray`` (cmx-ray, a private local cluster) runs the plan as one Ray task,
and the launcher inside it (torchrun, 2 ranks) is unchanged: launcher and executor are
separate axes. Skipped without cmx-ray."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("cmx_ray")


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
