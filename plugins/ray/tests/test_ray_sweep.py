"""A 12-point `cmx sweep` through the Ray executor: every point a normal stored run."""

from __future__ import annotations

import json
from pathlib import Path

from cmx_core import paths
from cmx_core.sweep import parse_axes, points, run_sweep


def test_a_12_point_sweep_on_ray(ray_head: str, cmx_home: Path) -> None:
    matrix = points(parse_axes(["size=5,10,20", "repeats=1,2,3,4"]))
    options = ["--executor", "ray", "--executor-opt", f"address={ray_head}", "--executor-opt", "env=CMX_HOME"]
    result = run_sweep("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=3, executor="ray",
                       run_options=options)
    assert result.failed == 0, [p.message for p in result.points if p.failed]
    assert len(result.points) == 12
    for point in result.points:
        assert point.result_path is not None
        document = json.loads(Path(point.result_path).read_text())
        assert document["provenance"]["sweep"]["point"] == point.point and document["status"] == "valid"
        assert any(Path(a["path"]).name == "ray-job.json" for a in document["artifacts"])  # it ran as a Ray task
