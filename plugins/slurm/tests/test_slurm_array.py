"""A sweep as one job array: each point's run comes back as its own outcome, which the
engine's recorder turns into a schema-valid result equal to the point's local run."""

from __future__ import annotations

import json
from pathlib import Path

from cmx_core.api import ExecutionContext, ExecutionRequest
from cmx_core.testing.registry import registry_events
from cmx_core.testing.runs import Provenance, engine, new_run_id, record_run
from cmx_slurm.array import collect, submit_array
from cmx_slurm.settings import SlurmSettings
from cmx_slurm.testing import Cluster


def _requests(base: Path, sizes: list[int], settings: SlurmSettings) -> list[ExecutionRequest]:
    session = engine.open_session()
    requests = []
    for size in sizes:
        plan = engine.plan_in(session, "demo,sort", {"size": size, "repeats": 1})
        run_dir = base / f"point-{size}"
        run_dir.mkdir(parents=True)
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(ExecutionContext(plan, settings, session.facts, session.registry),
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id()))
    return requests


def test_an_array_runs_every_point_and_each_result_is_the_points_own(slurm: Cluster, cmx_home: Path,
                                                                     tmp_path: Path) -> None:
    sizes = [100, 200, 300, 400]
    settings = SlurmSettings(poll_s=0.2)
    requests = _requests(tmp_path / "sweep", sizes, settings)
    array = submit_array(requests, settings)
    assert array.task_ids == tuple(f"{array.array_id}_{i}" for i in range(4))
    outcomes = collect(array)
    for size, request, outcome in zip(sizes, requests, outcomes, strict=True):
        assert outcome.error is None and [n.recipe for n in outcome.nodes] == ["demo-data", "demo-sort"]
        far = json.loads((request.run_dir / "remote" / "result.json").read_text())
        assert far["outputs"]["best_time_s"] > 0
        recorded = json.loads((request.run_dir / "remote" / "plan.json").read_text())
        assert json.dumps(recorded).count(f'"size": {size}') >= 1  # each task ran its own point's lock
        record = json.loads((request.run_dir / "remote-stage" / "slurm-job.json").read_text())
        assert record["array"] == array.array_id and record["job_id"] == f"{array.array_id}_{sizes.index(size)}"
        digest = engine.write_lock(request.run_dir, request.context.plan, request.context.registry)
        path, document = record_run(request, outcome, Provenance(digest, []), registry_events(request.context.registry))
        assert document["status"] == "valid" and path == request.run_dir / "result.json"
        local = engine.run_tags("demo,sort", {"size": size, "repeats": 1}, executor="local")
        assert sorted(document["outputs"]) == sorted(local.document["outputs"])
        assert {k: v["unit"] for k, v in document["metrics"].items()} == \
            {k: v["unit"] for k, v in local.document["metrics"].items()}
