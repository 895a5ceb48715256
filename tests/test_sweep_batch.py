"""`cmx sweep` on an executor with a batch entry (`Executor.run_many`): every point planned in
this process and handed over at once, each outcome recorded as a normal run (the same result
as one `cmx run` process per point gives); a point whose plan fails, a batch that cannot run
and Ctrl-C. The executor here runs each request with the built-in local executor, for real;
cmx-slurm's and cmx-ray's batch entries have their own tests against a real Slurm and Ray."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from cmx_core import paths
from cmx_core.api import ExecutionOutcome, ExecutionRequest, Executor, hookimpl
from cmx_core.errors import CmxError, Interrupted
from cmx_core.plugins import loader as plugins
from cmx_core.results.comparable import comparable_across_sweeps
from cmx_core.results.store import ResultStore
from cmx_core.run import engine
from cmx_core.sweep.batch import PointOptions, parse_point_options
from cmx_core.sweep.runner import SweepRequest, SweepResult, parse_axes, points, read_manifest, run_sweep
from cmx_core.testing import exit_code_recipe

TEST_PLUGIN = frozenset({"batching-exec"})  # loaded in this process only

EXITS = exit_code_recipe("test-sweep-batch-exit", "batchexit")


class _Batching:
    """An executor named ``batching`` whose batch entry runs each request locally, in order;
    ``calls`` holds (number of requests, max_parallel) per call; ``fail`` is raised instead."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[int, int]] = []
        self.fail = fail

    def _one(self, request: ExecutionRequest) -> ExecutionOutcome:
        local = request.context.registry.executors["local"]
        return local.run(request)

    def _many(self, requests: Sequence[ExecutionRequest], max_parallel: int) -> tuple[ExecutionOutcome, ...]:
        self.calls.append((len(requests), max_parallel))
        if self.fail is not None:
            raise self.fail
        return tuple(self._one(r) for r in requests)

    @hookimpl
    def cmx_register_executors(self, register: Callable[[Executor], None]) -> None:
        register(Executor(name="batching", summary="local runs, as one batch", run=self._one, run_many=self._many))


@pytest.fixture
def batching(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> _Batching:
    plugin = _Batching()
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("batching-exec", plugin)]))
    return plugin


def _point_logs(result: SweepResult) -> list[Path]:
    return sorted((result.manifest.parent / result.sweep_id).glob("point-*.log"))


def test_a_12_point_sweep_is_one_batch_of_stored_runs(batching: _Batching, cli: Callable[..., Any]) -> None:
    result = cli("sweep", "--tags=demo,sort", "--matrix", "size=5,10,20", "--matrix", "repeats=1,2,3,4",
                 "--executor", "batching", "-j", "3", "--json")
    assert result.code == 0, result.err
    sweep = json.loads(result.out)
    assert batching.calls == [(12, 3)]  # one batch, -j its bound
    assert sweep["failed"] == 0 and len(sweep["points"]) == 12
    assert list((paths.data_dir() / "sweeps" / sweep["sweep_id"]).glob("point-*.log")) == []
    store = ResultStore(paths.results_db())
    for point in sweep["points"]:
        document = store.get(point["run_id"]).document
        assert document["provenance"]["sweep"] == {"id": sweep["sweep_id"], "index": point["index"],
                                                   "point": point["point"]}
        assert Path(point["result_path"]).parent == paths.data_dir() / "sweeps" / sweep["sweep_id"] / \
            f"point-{point['index']}"
        for name in ("plan.json", "lock.json", "nodes.json", "facts.json"):
            assert (Path(point["result_path"]).parent / name).is_file()
    rows = json.loads(cli("results", "compare", "--sweep", sweep["sweep_id"], "--json").out)["rows"]
    assert [r["index"] for r in rows] == list(range(12)) and all(r["metrics"] for r in rows)
    assert list((paths.data_dir() / "inflight").glob("*.json")) == []


def test_the_batch_results_equal_one_process_per_point(batching: _Batching) -> None:
    matrix = points(parse_axes(["size=5,9", "repeats=1,2"]))
    together = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), executor="batching",
                                      run_options=["--executor", "batching"]))
    apart = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=2,
                                   run_options=["--executor", "local"]))
    assert batching.calls == [(4, 1)] and len(_point_logs(apart)) == 4 and _point_logs(together) == []
    for a, b in zip(together.points, apart.points, strict=True):
        assert (a.status, a.exit_code) == (b.status, b.exit_code) == ("valid", 0)
        assert a.result_path is not None and b.result_path is not None
        one = comparable_across_sweeps(json.loads(Path(a.result_path).read_text()), ignore_plugins=TEST_PLUGIN)
        other = comparable_across_sweeps(json.loads(Path(b.result_path).read_text()), ignore_plugins=TEST_PLUGIN)
        assert {k: (one.get(k), other.get(k)) for k in {*one, *other} if one.get(k) != other.get(k)} == {}


def test_failed_and_refused_points_do_not_stop_the_others(batching: _Batching, tmp_path: Path,
                                                          cli: Callable[..., Any]) -> None:
    (tmp_path / "exits.yaml").write_text(EXITS)
    matrix = [{"code": c} for c in ("0", "3", "0", "12")]  # 3: the step fails; 12: the plan refuses it
    result = run_sweep(SweepRequest("test,sweep,batchexit", {}, matrix, data_dir=paths.data_dir(),
                                    executor="batching",
                                    run_options=["--recipes", str(tmp_path), "--executor", "batching"]))
    assert batching.calls == [(3, 1)]  # the refused point never reached the executor
    assert result.failed == 2
    assert [(p.status, p.exit_code != 0, p.run_id is not None) for p in result.points] == [
        ("completed", False, True), ("error", True, True), ("completed", False, True), ("failed", True, False)]
    assert result.points[1].message.startswith("cmx: error: ") and "exit" in result.points[1].message
    refused = result.points[3]
    assert refused.exit_code == 2 and "code" in refused.message and "\n" not in refused.message
    manifest = read_manifest(paths.data_dir(), result.sweep_id)
    assert manifest["failed"] == 2 and manifest["points"][3]["status"] == "failed"
    code = cli("sweep", "--tags=test,sweep,batchexit", "--recipes", str(tmp_path), "--matrix", "code=0,3,4",
               "--executor", "batching").code
    assert code == 2  # the exit status is the number of failed points


def test_a_batch_that_cannot_run_is_an_error_result_for_every_point(cmx_home: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = _Batching(fail=CmxError("the scheduler is down"))
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("batching-exec", plugin)]))
    result = run_sweep(SweepRequest("demo,sort", {}, [{"size": "5"}, {"size": "6"}], data_dir=paths.data_dir(),
                                    executor="batching", run_options=["--executor", "batching"]))
    assert result.failed == 2
    store = ResultStore(paths.results_db())
    for point in result.points:
        assert point.status == "error" and point.run_id is not None
        assert "batching executor: the scheduler is down" in store.get(point.run_id).document["error"]["message"]


def test_ctrl_c_in_the_batch_leaves_no_point_marked(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = _Batching(fail=Interrupted("interrupted; the batch was cancelled"))
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load_registry(extra=[("batching-exec", plugin)]))
    with pytest.raises(Interrupted, match="the batch was cancelled"):
        run_sweep(SweepRequest("demo,sort", {}, [{"size": "5"}, {"size": "6"}], data_dir=paths.data_dir(),
                               executor="batching", run_options=["--executor", "batching"]))
    assert plugin.calls == [(2, 1)]
    assert list((paths.data_dir() / "inflight").glob("*.json")) == []


def test_options_only_cmx_run_knows_keep_one_process_per_point(batching: _Batching) -> None:
    result = run_sweep(SweepRequest("demo,sort", {}, [{"size": "5"}], data_dir=paths.data_dir(),
                                    executor="batching", run_options=["--executor", "batching", "--refresh"]))
    assert batching.calls == [] and len(_point_logs(result)) == 1


def test_point_options() -> None:
    assert parse_point_options(["--recipes", "a", "--recipes=b", "--facts", "f.json", "--no-cache",
                                "--executor", "ray", "--executor-opt", "address=h:1", "--executor-opt=env=X"]) \
        == PointOptions(("a", "b"), "f.json", True, False, "ray", ("address=h:1", "env=X"))
    assert parse_point_options(["--container"]) == PointOptions(container=True)
    assert PointOptions(container=True).executor_name(None) == "docker"
    assert parse_point_options(["recipe"]) is None and parse_point_options(["--facts"]) is None


def test_a_sweep_plans_each_point_once(batching: _Batching, cli: Callable[..., Any],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    planned: list[dict[str, Any]] = []
    resolve = engine._resolve_plan

    def counting(tags: Any, inputs: Any, session: Any) -> Any:
        planned.append(dict(inputs or {}))
        return resolve(tags, inputs, session)

    monkeypatch.setattr(engine, "_resolve_plan", counting)
    result = cli("sweep", "--tags=demo,sort", "--matrix", "size=3,4,5", "--executor", "batching", "--json")
    assert result.code == 0, result.err
    assert batching.calls == [(3, 1)]
    assert sorted(p["size"] for p in planned) == ["3", "4", "5"]  # the check's plans are the ones that ran
