"""A 12-point `cmx sweep` through the Ray executor (every point a normal stored run), and the
batch path for sweeps (cmx_ray.batch): each point its own result, Ctrl-C cancels every task."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cmx_core import paths
from cmx_core.sweep import parse_axes, points, run_sweep

SLOW = """\
name: test-ray-batch-slow
tags: [test, ray, batchslow]
summary: sleeps until cancelled
inputs:
  n: {type: integer}
steps:
  - uses: shell
    with: {cmd: [sleep, "38.4127"]}
"""


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


def test_a_batch_runs_every_point_over_one_connection_and_each_result_is_the_points_own(
        ray_head: str, cmx_home: Path) -> None:
    """cmx_ray.batch.run_batch: the sweep path; all tasks submitted at once, outcomes in order."""
    from cmx_ray.batch import run_batch
    from cmx_ray.settings import RaySettings

    from cmx_core import engine
    from cmx_core.api import ExecutionRequest
    from cmx_core.runids import new_run_id

    settings = RaySettings(address=ray_head, env=("CMX_HOME",))
    session = engine.open_session()
    requests = []
    for size in (7, 11, 13):
        plan = engine.plan("demo,sort", {"size": size, "repeats": 1}, session=session)
        run_dir = paths.data_dir() / "batch" / f"point-{size}"
        run_dir.mkdir(parents=True)
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(plan=plan, facts=session.facts, registry=session.registry,
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id(),
                                         settings=settings))
    outcomes = run_batch(requests, settings)
    assert [o.error for o in outcomes] == [None, None, None]
    for size, request, outcome in zip((7, 11, 13), requests, outcomes, strict=True):
        far = json.loads((request.run_dir / "remote" / "result.json").read_text())
        assert far["provenance"]["query"]["inputs"]["size"] == size  # each point ran its own lock
        assert outcome.nodes and outcome.facts is not None
        job = json.loads((request.run_dir / "ray-job.json").read_text())
        assert job["cluster"] == ray_head and job["exit_code"] == 0


def test_ctrl_c_cancels_every_task_of_a_batch_and_their_processes(ray_head: str, cmx_home: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  mentioning: Callable[[str], list[int]]) -> None:
    from cmx_ray import executor
    from cmx_ray.batch import run_batch
    from cmx_ray.settings import RaySettings

    from cmx_core import engine
    from cmx_core.api import ExecutionRequest
    from cmx_core.errors import Interrupted
    from cmx_core.runids import new_run_id

    (tmp_path / "s.yaml").write_text(SLOW)
    settings = RaySettings(address=ray_head, env=("CMX_HOME",))
    session = engine.open_session([tmp_path])
    requests = []
    for index in range(2):
        plan = engine.plan("test,ray,batchslow", {"n": index}, session=session)
        run_dir = tmp_path / f"point-{index}"
        run_dir.mkdir()
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(plan=plan, facts=session.facts, registry=session.registry, run_dir=run_dir,
                                         lock_path=run_dir / "lock.json", run_id=new_run_id(), settings=settings))

    def interrupted(self: object, handle: object) -> None:
        deadline = time.monotonic() + 60
        while not mentioning("38.4127") and time.monotonic() < deadline:
            time.sleep(0.2)  # the far step runs: now press Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(executor.RayExecutor, "wait", interrupted)
    with pytest.raises(Interrupted, match="the batch's 2 Ray tasks were cancelled"):
        run_batch(requests, settings)
    deadline = time.monotonic() + 30
    while mentioning("38.4127") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert mentioning("38.4127") == []


def test_the_far_task_is_made_once_per_process() -> None:
    from cmx_ray.executor import _far_task

    assert _far_task() is _far_task()
