"""`cmx sweep --executor ray`: the points go through cmx-ray's batch entry (cmx_ray.batch, one
connection, `-j N` the most tasks at once), every point a normal stored run with its sweep
provenance; a failing point does not stop the others and counts in the exit status; the
results equal those of one `cmx run` process per point; Ctrl-C cancels every task."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from cmx_core.api import SweepRequest, comparable_across_sweeps, run_sweep
from cmx_core.testing import exit_code_recipe
from cmx_core.testing.cli import main
from cmx_core.testing.results import ResultStore
from cmx_core.testing.runs import paths
from cmx_core.testing.sweep import SweepResult, parse_axes, points, read_manifest
from tests.test_sweep_resume import POINTS, SQUARE, resumed_equals_uninterrupted

# A sleep of its own (the test looks for it by its command line): another run of this suite
# on the same machine has a sleep of another length.
SLEEP_S = f"38.{secrets.randbelow(9000) + 1000}"

SLOW = """\
name: test-ray-batch-slow
tags: [test, ray, batchslow]
summary: sleeps until cancelled
inputs:
  n: {type: integer}
steps:
  - uses: shell
    with: {cmd: [sleep, "SLEEP_S"]}
""".replace("SLEEP_S", SLEEP_S)


EXITS = exit_code_recipe("test-ray-sweep-exit", "rayexit")


def _ray(address: str) -> list[str]:
    return ["--executor", "ray", "--executor-opt", f"address={address}", "--executor-opt", "env=CMX_HOME"]


def _point_logs(result: SweepResult) -> list[Path]:
    """The stderr files of per-point `cmx run` processes (the batch path starts none)."""
    return sorted((result.manifest.parent / result.sweep_id).glob("point-*.log"))


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each cmx_ray.batch.run_batch call (the real one runs)."""
    from cmx_ray import batch

    calls: list[int] = []
    real = batch.run_batch

    def counted(requests: Sequence[Any], settings: Any = None, **kwargs: Any) -> Any:
        calls.append(len(requests))
        return real(requests, settings, **kwargs)

    monkeypatch.setattr(batch, "run_batch", counted)
    return calls


def test_a_12_point_sweep_on_ray_is_one_batch(ray_head: str, cmx_home: Path, batches: list[int]) -> None:
    matrix = points(parse_axes(["size=5,10,20", "repeats=1,2,3,4"]))
    result = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=3, executor="ray",
                                    run_options=_ray(ray_head)))
    assert result.failed == 0, [p.message for p in result.points if p.failed]
    assert len(result.points) == 12
    assert batches == [12] and _point_logs(result) == []  # one batch over one connection, no cmx run each
    store = ResultStore(paths.results_db())
    for point in result.points:
        assert point.result_path is not None and point.run_id is not None
        document = store.get(point.run_id).document
        assert document["provenance"]["sweep"] == {"id": result.sweep_id, "index": point.index,
                                                   "point": point.point}
        assert document["status"] == "valid"
        assert document["provenance"]["query"]["inputs"]["repeats"] == int(point.point["repeats"])
        assert any(Path(a["path"]).name == "ray-job.json" for a in document["artifacts"])  # it ran as a Ray task
        job = json.loads((Path(point.result_path).parent / "ray-job.json").read_text())
        assert job["cluster"] == ray_head and job["exit_code"] == 0
    assert [p["run_id"] for p in read_manifest(paths.data_dir(), result.sweep_id)["points"]] == \
        [p.run_id for p in result.points]


def test_a_failing_point_does_not_stop_the_others_and_counts(ray_head: str, cmx_home: Path, tmp_path: Path,
                                                              batches: list[int]) -> None:
    (tmp_path / "exits.yaml").write_text(EXITS)
    options = ["--recipes", str(tmp_path), *_ray(ray_head)]
    matrix = [{"code": c} for c in ("0", "3", "0", "12")]  # 3: the step fails; 12: the plan refuses it
    result = run_sweep(SweepRequest("test,sweep,rayexit", {}, matrix, data_dir=paths.data_dir(), jobs=2,
                                    executor="ray", run_options=options))
    assert result.failed == 2 and batches == [3]  # the refused point never reached Ray
    assert [(p.status, p.exit_code != 0) for p in result.points] == [
        ("completed", False), ("error", True), ("completed", False), ("failed", True)]
    assert result.points[1].run_id and "exit" in result.points[1].message  # a stored error result
    refused = result.points[3]
    assert refused.run_id is None and refused.exit_code == 2 and "code" in refused.message
    code = main(["sweep", "--tags=test,sweep,rayexit", "--recipes", str(tmp_path), "--matrix", "code=3,0,4",
                 *_ray(ray_head), "-j", "2", "--json"])
    assert code == 2  # the exit status is the number of failed points


def test_the_batch_results_equal_one_process_per_point(ray_head: str, cmx_home: Path, batches: list[int]) -> None:
    matrix = points(parse_axes(["size=5,9", "repeats=1,2"]))
    together = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=2, executor="ray",
                                      run_options=_ray(ray_head)))
    apart = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=2, executor="ray",
                                   run_options=_ray(ray_head), batch=False))
    assert together.failed == apart.failed == 0
    assert batches == [4] and _point_logs(together) == [] and len(_point_logs(apart)) == 4
    for a, b in zip(together.points, apart.points, strict=True):
        assert a.result_path is not None and b.result_path is not None
        first = json.loads(Path(a.result_path).read_text())
        second = json.loads(Path(b.result_path).read_text())
        one, other = comparable_across_sweeps(first), comparable_across_sweeps(second)
        assert {k: (one.get(k), other.get(k)) for k in {*one, *other} if one.get(k) != other.get(k)} == {}


def test_j_bounds_the_tasks_running_at_once(ray_head: str, cmx_home: Path) -> None:
    """With -j 1 each point's far run starts after the previous one ended (the far results'
    own times; nothing here depends on how fast the machine is)."""
    matrix = points(parse_axes(["size=3,4,6"]))
    result = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=1, executor="ray",
                                    run_options=_ray(ray_head)))
    assert result.failed == 0
    spans = []
    for point in result.points:
        assert point.result_path is not None
        far = json.loads((Path(point.result_path).parent / "remote" / "result.json").read_text())
        spans.append((far["timing"]["started_at"], far["timing"]["finished_at"]))
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans


def test_ctrl_c_cancels_a_sweeps_batch_and_leaves_no_point_marked(
        ray_head: str, cmx_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        mentioning: Callable[[str], list[int]]) -> None:
    from cmx_core.errors import Interrupted
    from cmx_ray import executor

    (tmp_path / "s.yaml").write_text(SLOW)

    def interrupted(self: object, handle: object) -> None:
        deadline = time.monotonic() + 60
        while not mentioning(SLEEP_S) and time.monotonic() < deadline:
            time.sleep(0.2)
        raise KeyboardInterrupt

    monkeypatch.setattr(executor.RayExecutor, "wait", interrupted)
    with pytest.raises(Interrupted, match="Ray tasks were cancelled"):
        run_sweep(SweepRequest("test,ray,batchslow", {}, [{"n": "1"}, {"n": "2"}], data_dir=paths.data_dir(),
                               jobs=2, executor="ray", run_options=["--recipes", str(tmp_path), *_ray(ray_head)]))
    assert list((paths.data_dir() / "inflight").glob("*.json")) == []
    deadline = time.monotonic() + 30
    while mentioning(SLEEP_S) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert mentioning(SLEEP_S) == []


def test_a_batch_runs_every_point_over_one_connection_and_each_result_is_the_points_own(
        ray_head: str, cmx_home: Path) -> None:
    """cmx_ray.batch.run_batch: the sweep path; all tasks submitted at once, outcomes in order."""
    from cmx_core.api import ExecutionContext, ExecutionRequest
    from cmx_core.testing.runs import engine, new_run_id
    from cmx_ray.batch import run_batch
    from cmx_ray.settings import RaySettings

    settings = RaySettings(address=ray_head, env=("CMX_HOME",))
    session = engine.open_session()
    requests = []
    for size in (7, 11, 13):
        plan = engine.plan_in(session, "demo,sort", {"size": size, "repeats": 1})
        run_dir = paths.data_dir() / "batch" / f"point-{size}"
        run_dir.mkdir(parents=True)
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(ExecutionContext(plan, settings, session.facts, session.registry),
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id()))
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
    from cmx_core.api import ExecutionContext, ExecutionRequest
    from cmx_core.errors import Interrupted
    from cmx_core.testing.runs import engine, new_run_id
    from cmx_ray import executor
    from cmx_ray.batch import run_batch
    from cmx_ray.settings import RaySettings

    (tmp_path / "s.yaml").write_text(SLOW)
    settings = RaySettings(address=ray_head, env=("CMX_HOME",))
    session = engine.open_session([tmp_path])
    requests = []
    for index in range(2):
        plan = engine.plan_in(session, "test,ray,batchslow", {"n": index})
        run_dir = tmp_path / f"point-{index}"
        run_dir.mkdir()
        engine.write_lock(run_dir, plan, session.registry)
        requests.append(ExecutionRequest(ExecutionContext(plan, settings, session.facts, session.registry),
                                         run_dir=run_dir, lock_path=run_dir / "lock.json", run_id=new_run_id()))

    def interrupted(self: object, handle: object) -> None:
        deadline = time.monotonic() + 60
        while not mentioning(SLEEP_S) and time.monotonic() < deadline:
            time.sleep(0.2)  # the far step runs: now press Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(executor.RayExecutor, "wait", interrupted)
    with pytest.raises(Interrupted, match="the batch's 2 Ray tasks were cancelled"):
        run_batch(requests, settings)
    deadline = time.monotonic() + 30
    while mentioning(SLEEP_S) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert mentioning(SLEEP_S) == []


def test_the_far_task_is_made_once_per_process() -> None:
    from cmx_ray.executor import _far_task

    assert _far_task() is _far_task()


PAUSE = """\
name: test-ray-sweep-pause
tags: [test, ray, sweeppause]
summary: sleeps for its input
inputs:
  pause: {type: number, default: 0}
steps:
  - uses: shell
    with: {cmd: [sleep, "{{ inputs.pause }}"]}
"""


def test_each_point_of_a_batch_records_its_own_wall_time(ray_head: str, cmx_home: Path, tmp_path: Path) -> None:
    (tmp_path / "pause.yaml").write_text(PAUSE)
    # -j 1: the second task is submitted when the first has slept 2 s; its own time does not include that
    result = run_sweep(SweepRequest("test,ray,sweeppause", {}, [{"pause": "2"}, {"pause": "0"}],
                                    data_dir=paths.data_dir(), jobs=1, executor="ray",
                                    run_options=["--recipes", str(tmp_path), *_ray(ray_head)]))
    assert result.failed == 0, [p.message for p in result.points]
    slow, quick = result.points
    assert slow.wall_s >= 2.0 > quick.wall_s
    for point in result.points:
        timing = json.loads(Path(str(point.result_path)).read_text())["timing"]
        assert abs(timing["wall_s"] - point.wall_s) < 0.01  # the stored result says the same


def test_a_ray_sweep_killed_halfway_then_resumed_equals_an_uninterrupted_one(ray_head: str, cmx_home: Path,
                                                                             tmp_path: Path) -> None:
    """Each point is recorded as its task ends (the executor's ``run_each``), so a driver
    killed with SIGKILL mid-batch loses none that had ended; the resume runs the rest."""
    (tmp_path / "square.yaml").write_text(SQUARE)
    args = ["sweep", "--tags=test,sweep,square", "--recipes", str(tmp_path), "--no-cache", *_ray(ray_head),
            "--matrix", "n=" + ",".join(str(n) for n in range(1, POINTS + 1)), "--json"]
    resumed_equals_uninterrupted(args, timeout_s=300)
