"""A 12-point `cmx sweep` through the Slurm executor: every point a normal stored run."""

from __future__ import annotations

import json
from pathlib import Path

from cmx_slurm.testing import Cluster

from cmx_core import paths
from cmx_core.sweep import parse_axes, points, run_sweep


def test_a_12_point_sweep_on_slurm(slurm: Cluster, cmx_home: Path) -> None:
    matrix = points(parse_axes(["size=5,10,20", "repeats=1,2,3,4"]))
    result = run_sweep("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="slurm",
                       run_options=["--executor", "slurm", "--executor-opt", "poll_s=0.2"])
    assert result.failed == 0, [p.message for p in result.points if p.failed]
    assert len(result.points) == 12
    for point in result.points:
        assert point.result_path is not None
        document = json.loads(Path(point.result_path).read_text())
        assert document["provenance"]["sweep"]["point"] == point.point and document["status"] == "valid"
        logs = [a["path"] for a in document["artifacts"] if a["kind"] == "log"]
        assert any("slurm-" in Path(p).name for p in logs)  # it really went through sbatch
