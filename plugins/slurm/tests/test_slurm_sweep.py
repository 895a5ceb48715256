"""`cmx sweep --executor slurm`: the points go through cmx-slurm's batch entry, one job array
(`-j N` its throttle), and every point is a normal stored run with its sweep provenance; a
failing point does not stop the others and counts in the exit status; the results equal
those of one `cmx run` process per point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import SweepRequest, comparable_across_sweeps, run_sweep
from cmx_core.testing import exit_code_recipe
from cmx_core.testing.cli import main
from cmx_core.testing.results import ResultStore
from cmx_core.testing.runs import paths
from cmx_core.testing.sweep import SweepResult, parse_axes, points, read_manifest
from cmx_slurm.testing import Cluster
from tests.test_sweep_resume import POINTS, SQUARE, resumed_equals_uninterrupted

SLURM = ["--executor", "slurm", "--executor-opt", "poll_s=0.2"]

EXITS = exit_code_recipe("test-slurm-sweep-exit", "slurmexit")


def _job(result_path: str | None) -> dict[str, Any]:
    assert result_path is not None
    record = json.loads((Path(result_path).parent / "remote-stage" / "slurm-job.json").read_text())
    assert isinstance(record, dict)
    return record


def _point_logs(result: SweepResult) -> list[Path]:
    """The stderr files of per-point `cmx run` processes (the batch path starts none)."""
    return sorted((result.manifest.parent / result.sweep_id).glob("point-*.log"))


def test_a_12_point_sweep_on_slurm_is_one_job_array(slurm: Cluster, cmx_home: Path) -> None:
    matrix = points(parse_axes(["size=5,10,20", "repeats=1,2,3,4"]))
    result = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="slurm",
                                    run_options=SLURM))
    assert result.failed == 0, [p.message for p in result.points if p.failed]
    assert len(result.points) == 12 and _point_logs(result) == []
    records = [_job(p.result_path) for p in result.points]
    assert len({r["array"] for r in records}) == 1  # one sbatch for the whole sweep
    assert [r["job_id"] for r in records] == [f"{records[0]['array']}_{i}" for i in range(12)]
    assert "--array=0-11%4" in records[0]["sbatch"]  # -j 4 is the array's throttle
    store = ResultStore(paths.results_db())
    for point in result.points:
        assert point.run_id is not None and point.result_path is not None
        document = store.get(point.run_id).document
        assert document["provenance"]["sweep"] == {"id": result.sweep_id, "index": point.index,
                                                   "point": point.point}
        assert document["status"] == "valid"
        assert document["provenance"]["query"]["inputs"]["size"] == int(point.point["size"])
        assert json.loads(Path(point.result_path).read_text())["run_id"] == point.run_id
        logs = [Path(a["path"]).name for a in document["artifacts"] if a["kind"] == "log"]
        assert "slurm-job.json" in logs  # it really went through sbatch
    manifest = read_manifest(paths.data_dir(), result.sweep_id)
    assert [p["run_id"] for p in manifest["points"]] == [p.run_id for p in result.points]


def test_a_failing_point_does_not_stop_the_others_and_counts(slurm: Cluster, cmx_home: Path,
                                                              tmp_path: Path) -> None:
    (tmp_path / "exits.yaml").write_text(EXITS)
    options = ["--recipes", str(tmp_path), *SLURM]
    matrix = [{"code": c} for c in ("0", "3", "0", "12")]  # 3: the step fails; 12: the plan refuses it
    result = run_sweep(SweepRequest("test,sweep,slurmexit", {}, matrix, data_dir=paths.data_dir(), jobs=4,
                                    executor="slurm", run_options=options))
    assert result.failed == 2
    assert [(p.status, p.exit_code != 0) for p in result.points] == [
        ("completed", False), ("error", True), ("completed", False), ("failed", True)]
    assert result.points[1].run_id and "exit" in result.points[1].message  # a stored error result
    refused = result.points[3]
    assert refused.run_id is None and refused.exit_code == 2 and "code" in refused.message
    assert refused.message.startswith("cmx: error: ") and "\n" not in refused.message
    assert len({_job(p.result_path)["array"] for p in result.points[:3]}) == 1
    code = main(["sweep", "--tags=test,sweep,slurmexit", "--recipes", str(tmp_path), "--matrix", "code=0,3,4",
                 *SLURM, "-j", "3", "--json"])
    assert code == 2  # the exit status is the number of failed points


def test_the_batch_results_equal_one_process_per_point(slurm: Cluster, cmx_home: Path) -> None:
    matrix = points(parse_axes(["size=5,9", "repeats=1,2"]))
    together = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="slurm",
                                      run_options=SLURM))
    apart = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="slurm",
                                   run_options=SLURM, batch=False))
    assert together.failed == apart.failed == 0
    assert _point_logs(together) == [] and len(_point_logs(apart)) == 4  # the two paths really differ
    assert len({_job(p.result_path)["array"] for p in together.points}) == 1
    assert len({_job(p.result_path)["job_id"] for p in apart.points}) == 4
    for a, b in zip(together.points, apart.points, strict=True):
        assert a.result_path is not None and b.result_path is not None
        first = json.loads(Path(a.result_path).read_text())
        second = json.loads(Path(b.result_path).read_text())
        one, other = comparable_across_sweeps(first), comparable_across_sweeps(second)
        assert {k: (one.get(k), other.get(k)) for k in {*one, *other} if one.get(k) != other.get(k)} == {}


@pytest.mark.parametrize("jobs", [1, 12])
def test_the_throttle_is_left_out_when_j_covers_every_point(slurm: Cluster, cmx_home: Path, jobs: int) -> None:
    from cmx_core.api import ExecutionContext, ExecutionRequest
    from cmx_core.testing.runs import engine, new_run_id
    from cmx_slurm.array import run_many
    from cmx_slurm.settings import SlurmSettings

    session = engine.open_session()
    requests = []
    for size in (3, 4):
        plan = engine.plan_in(session, "demo,sort", {"size": size, "repeats": 1})
        run_dir = paths.data_dir() / f"j{jobs}" / f"point-{size}"
        run_dir.mkdir(parents=True)
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(ExecutionContext(plan, SlurmSettings(poll_s=0.2), session.facts,
                                                          session.registry),
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id()))
    outcomes = run_many(requests, jobs)
    assert [o.error for o in outcomes] == [None, None]
    sbatch = json.loads((requests[0].run_dir / "remote-stage" / "slurm-job.json").read_text())["sbatch"]
    assert ("--array=0-1%1" if jobs == 1 else "--array=0-1") in sbatch


TIMED = """\
name: test-slurm-shape-{name}
tags: [test, slurmshape, {name}]
summary: sleeps for its input, with a time limit
inputs:
  pause: {{type: number, default: 0}}
resources: {{time: {time}}}
steps:
  - uses: shell
    with: {{cmd: [sleep, "{{{{ inputs.pause }}}}"]}}
"""


def _requests(folder: Path, wanted: list[tuple[str, str]]) -> list[Any]:
    from cmx_core.testing import execution_request
    from cmx_core.testing.runs import ExecutorChoice, engine
    from cmx_slurm.settings import SlurmSettings

    session = engine.open_session([folder])
    plans = [engine.plan_in(session, f"test,slurmshape,{name}", {"pause": pause}, ExecutorChoice("slurm"))
             for name, pause in wanted]
    return [execution_request(plan, folder.parent / "runs" / f"point-{i}", settings=SlurmSettings(poll_s=0.2))
            for i, plan in enumerate(plans)]


def test_points_of_different_shapes_get_an_array_each(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    from cmx_slurm.array import run_many, shapes

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for name, time in (("short", "5m"), ("long", "10m")):
        (recipes / f"{name}.yaml").write_text(TIMED.format(name=name, time=time))
    requests = _requests(recipes, [("short", "0"), ("long", "0"), ("short", "0")])
    assert shapes(requests) == [(0, 2), (1,)]
    outcomes = run_many(requests, 3)
    assert [o.error for o in outcomes] == [None, None, None]
    records = [json.loads((r.run_dir / "remote-stage" / "slurm-job.json").read_text()) for r in requests]
    assert records[0]["array"] == records[2]["array"] != records[1]["array"]  # two arrays
    assert "--time=5" in records[0]["sbatch"] and "--time=10" in records[1]["sbatch"]  # each its own time


def test_each_point_of_an_array_records_its_own_wall_time(slurm: Cluster, cmx_home: Path, tmp_path: Path) -> None:
    (tmp_path / "short.yaml").write_text(TIMED.format(name="short", time="5m"))
    # -j 1: the array's throttle runs the second point after the first has slept 2 s
    result = run_sweep(SweepRequest("test,slurmshape,short", {}, [{"pause": "2"}, {"pause": "0"}],
                                    data_dir=paths.data_dir(), jobs=1, executor="slurm",
                                    run_options=["--recipes", str(tmp_path), *SLURM]))
    assert result.failed == 0, [p.message for p in result.points]
    slow, quick = result.points
    assert slow.wall_s >= 2.0 > quick.wall_s
    assert len({_job(p.result_path)["array"] for p in result.points}) == 1


def test_a_slurm_sweep_killed_halfway_then_resumed_equals_an_uninterrupted_one(slurm: Cluster, cmx_home: Path,
                                                                               tmp_path: Path) -> None:
    """Each point is recorded as its array task ends (the executor's ``run_each``), so a
    driver killed with SIGKILL mid-array loses none that had ended; the resume adopts the rest
    (the old array's last tasks run on by themselves: their points are waited for, not run
    again; test_slurm_records.py checks that)."""
    (tmp_path / "square.yaml").write_text(SQUARE)
    args = ["sweep", "--tags=test,sweep,square", "--recipes", str(tmp_path), "--no-cache", *SLURM, "-j", "1",
            "--matrix", "n=" + ",".join(str(n) for n in range(1, POINTS + 1)), "--json"]
    resumed_equals_uninterrupted(args, timeout_s=300)
