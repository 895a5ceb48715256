"""`cmx sweep --executor k8s`: the points go through cmx-k8s's batch entry, ONE Indexed Job
(`-j N` its parallelism), applied with the real `kubernetes` client against the STAND-IN
API server (standin.py; no real cluster can run here); every point is a normal stored run
with its sweep provenance; a failing point does not stop the others and counts in the exit
status; the results equal those of one `cmx run` process per point; the Job and ConfigMap
are deleted at the end and on Ctrl-C."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import standin

from cmx_core.api import SweepRequest, comparable_across_sweeps, run_sweep
from cmx_core.testing import exit_code_recipe
from cmx_core.testing.cli import main
from cmx_core.testing.results import ResultStore
from cmx_core.testing.runs import paths
from cmx_core.testing.sweep import SweepResult, parse_axes, points

EXITS = exit_code_recipe("test-k8s-sweep-exit", "k8sexit")

SLOW = """\
name: test-k8s-sweep-slow
tags: [test, sweep, k8sslow]
summary: sleeps until it is killed
inputs:
  n: {type: integer, default: 1}
steps:
  - uses: shell
    with: {cmd: [sh, -c, "sleep 120"]}
"""


def _k8s(kubeconfig: Path, **extra: str) -> list[str]:
    options = {"kubeconfig": str(kubeconfig), "image": "cmx-python:standin", "python": sys.executable,
               "cmx": f"{sys.executable} -m cmx_core", "poll_s": "0.2", **extra}
    return ["--executor", "k8s", *[a for k, v in options.items() for a in ("--executor-opt", f"{k}={v}")]]


def _created(state: standin.StandIn, kind: str) -> list[dict[str, Any]]:
    return [body for body in state.created if body.get("kind") == kind]


def _point_logs(result: SweepResult) -> list[Path]:
    """The stderr files of per-point `cmx run` processes (the batch path starts none)."""
    return sorted((result.manifest.parent / result.sweep_id).glob("point-*.log"))


def _nothing_left(state: standin.StandIn) -> None:
    assert {k for k in state.objects if k[1] != "persistentvolumeclaims"} == set()  # Job, ConfigMap deleted
    assert state.pods == {}


def test_a_12_point_sweep_is_one_indexed_job(cluster: tuple[Path, standin.StandIn], cmx_home: Path) -> None:
    kubeconfig, state = cluster
    matrix = points(parse_axes(["size=5,10,20", "repeats=1,2,3,4"]))
    result = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="k8s",
                                    run_options=_k8s(kubeconfig, timeout_s="600")))
    assert result.failed == 0, [p.message for p in result.points if p.failed]
    assert len(result.points) == 12 and _point_logs(result) == []
    [job] = _created(state, "Job")  # one Job for the whole sweep
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 12, 4)
    assert spec["backoffLimitPerIndex"] == 0 and "backoffLimit" not in spec
    assert spec["activeDeadlineSeconds"] == 600 * 3  # timeout_s for each of the 3 waves of 4 points
    [config] = _created(state, "ConfigMap")
    assert sorted(config["data"]) == sorted(f"lock-{i}.json" for i in range(12))
    assert [c for c in state.calls if c[0] == "POST" and c[1].endswith("/jobs")] == [
        ("POST", "/apis/batch/v1/namespaces/default/jobs")]
    assert 1 <= state.peak <= 4  # -j 4: never more than 4 pods at once
    store = ResultStore(paths.results_db())
    for point in result.points:
        assert point.run_id is not None and point.result_path is not None
        document = store.get(point.run_id).document
        assert document["provenance"]["sweep"] == {"id": result.sweep_id, "index": point.index,
                                                   "point": point.point}
        assert document["status"] == "valid"
        assert document["provenance"]["query"]["inputs"]["size"] == int(point.point["size"])
        run_dir = Path(point.result_path).parent
        far = json.loads((run_dir / "remote" / "result.json").read_text())
        assert far["provenance"]["query"]["inputs"]["size"] == int(point.point["size"])  # its own index's result
        assert "=== cmx-k8s result v1 end ===" in (run_dir / "pod.log").read_text()
    _nothing_left(state)


def test_a_failing_point_does_not_stop_the_others_and_counts(cluster: tuple[Path, standin.StandIn],
                                                              cmx_home: Path, tmp_path: Path) -> None:
    kubeconfig, state = cluster
    (tmp_path / "exits.yaml").write_text(EXITS)
    options = ["--recipes", str(tmp_path), *_k8s(kubeconfig)]
    matrix = [{"code": c} for c in ("0", "3", "0", "12")]  # 3: the step fails; 12: the plan refuses it
    result = run_sweep(SweepRequest("test,sweep,k8sexit", {}, matrix, data_dir=paths.data_dir(), jobs=1,
                                    executor="k8s", run_options=options))
    assert result.failed == 2
    assert [(p.status, p.exit_code != 0) for p in result.points] == [
        ("completed", False), ("error", True), ("completed", False), ("failed", True)]
    assert result.points[1].run_id and "exit" in result.points[1].message  # a stored error result
    assert result.points[3].run_id is None and result.points[3].exit_code == 2
    [job] = _created(state, "Job")
    assert job["spec"]["completions"] == 3 and job["spec"]["parallelism"] == 1  # the index after 3 still ran
    _nothing_left(state)
    code = main(["sweep", "--tags=test,sweep,k8sexit", "--recipes", str(tmp_path), "--matrix", "code=0,3,4",
                 *_k8s(kubeconfig), "-j", "3", "--json"])
    assert code == 2  # the exit status is the number of failed points
    assert len(_created(state, "Job")) == 2


def test_a_pod_that_leaves_no_result_is_an_error_with_its_log_tail(cluster: tuple[Path, standin.StandIn],
                                                                    cmx_home: Path) -> None:
    kubeconfig, state = cluster  # python=cat: the pod ends (cat -c is refused) without a frame
    result = run_sweep(SweepRequest("demo,sort", {}, [{"size": "3"}, {"size": "4"}], data_dir=paths.data_dir(),
                                    jobs=2, executor="k8s", run_options=_k8s(kubeconfig, python="cat")))
    assert result.failed == 2
    for point in result.points:
        assert point.run_id and point.status == "error"
        assert "k8s job failed with code" in point.message and "without writing" in point.message
        assert "cat: invalid option" in point.message  # the pod log's last lines
    _nothing_left(state)


def test_the_batch_results_equal_one_process_per_point(cluster: tuple[Path, standin.StandIn],
                                                       cmx_home: Path) -> None:
    kubeconfig, state = cluster
    matrix = points(parse_axes(["size=5,9", "repeats=1,2"]))
    together = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="k8s",
                                      run_options=_k8s(kubeconfig)))
    assert len(_created(state, "Job")) == 1
    apart = run_sweep(SweepRequest("demo,sort", {}, matrix, data_dir=paths.data_dir(), jobs=4, executor="k8s",
                                   run_options=_k8s(kubeconfig), batch=False))
    assert together.failed == apart.failed == 0
    assert _point_logs(together) == [] and len(_point_logs(apart)) == 4  # the two paths really differ
    assert len(_created(state, "Job")) == 5  # one Indexed Job, then one Job per point
    for a, b in zip(together.points, apart.points, strict=True):
        assert a.result_path is not None and b.result_path is not None
        one = comparable_across_sweeps(json.loads(Path(a.result_path).read_text()))
        other = comparable_across_sweeps(json.loads(Path(b.result_path).read_text()))
        assert {k: (one.get(k), other.get(k)) for k in {*one, *other} if one.get(k) != other.get(k)} == {}
    _nothing_left(state)


def test_ctrl_c_deletes_the_indexed_job(cluster: tuple[Path, standin.StandIn], cmx_home: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_core.errors import Interrupted
    from cmx_k8s import sweep

    kubeconfig, state = cluster
    (tmp_path / "s.yaml").write_text(SLOW)

    started: list[standin.Pod] = []

    def interrupted(job: object) -> None:
        deadline = time.monotonic() + 60
        while len(started) < 2 and time.monotonic() < deadline:
            with state.lock:
                started[:] = [p for r in state.pods.values() for p in r.pods if p.process.poll() is None]
            time.sleep(0.1)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "follow", lambda job, on_outcome: interrupted(job))
    with pytest.raises(Interrupted, match=r"Indexed Job .* was deleted"):
        run_sweep(SweepRequest("test,sweep,k8sslow", {}, [{"n": "1"}, {"n": "2"}], data_dir=paths.data_dir(),
                               jobs=2, executor="k8s", run_options=["--recipes", str(tmp_path), *_k8s(kubeconfig)]))
    assert len(_created(state, "Job")) == 1
    assert ("DELETE", f"/apis/batch/v1/namespaces/default/jobs/{_created(state, 'Job')[0]['metadata']['name']}") \
        in state.calls
    assert list((paths.data_dir() / "inflight").glob("*.json")) == []
    assert len(started) == 2 and [p.process.poll() for p in started] == [-9, -9]  # both pods killed
    _nothing_left(state)


def test_the_standin_expands_variables_as_kubernetes_does() -> None:
    env = {"CMX_POINT_INDEX": "7", "A": "x"}
    assert standin.expand("lock-$(CMX_POINT_INDEX).json", env) == "lock-7.json"
    assert standin.expand("$$(A) $(A) $(UNSET) $$", env) == "$(A) x $(UNSET) $"
    assert standin.ranges([4, 0, 2, 1]) == "0-2,4" and standin.ranges([]) == ""


def test_the_standin_runs_an_indexed_job_index_by_index(cluster: tuple[Path, standin.StandIn],
                                                        tmp_path: Path) -> None:
    """Through the real client: index i exits with code i, two pods at a time (indexes 0
    and 1 each wait until both have started); each index fails on its own
    (backoffLimitPerIndex), and the status counts them."""
    from cmx_k8s import manifests
    from cmx_k8s.executor import clients
    from cmx_k8s.settings import K8sSettings

    kubeconfig, state = cluster
    gate = tmp_path / "gate"
    gate.mkdir()
    settings = K8sSettings(kubeconfig=str(kubeconfig), pvc="")
    built = manifests.sweep_manifests(manifests.JobSpec("cmx-standin", "img:1", manifests.sweep_command(())),
                                      ["{}"] * 3, settings, parallelism=2)
    built.job["spec"]["template"]["spec"]["containers"][0]["command"] = [
        "sh", "-c", f"touch {gate}/$(CMX_POINT_INDEX); until [ $$(ls {gate} | wc -l) -ge 2 ]; "
        "do sleep 0.05; done; echo index $(CMX_POINT_INDEX) 'costs $$5'; exit $(CMX_POINT_INDEX)"]
    manifests.validate(built)
    batch, core = clients(settings)
    core.create_namespaced_config_map("default", built.config_map)
    batch.create_namespaced_job("default", built.job)
    deadline = time.monotonic() + 60
    while not (status := batch.read_namespaced_job_status("cmx-standin", "default").status).conditions:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert [(c.type, c.reason) for c in status.conditions] == [("Failed", "FailedIndexes")]
    assert (status.succeeded, status.failed, status.completed_indexes, status.failed_indexes) == (1, 2, "0", "1-2")
    assert state.peak == 2
    pods = core.list_namespaced_pod("default", label_selector="job-name=cmx-standin").items
    indexes = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1", "2"]
    logs = sorted(core.read_namespaced_pod_log(p.metadata.name, "default") for p in pods)
    assert logs == [f"index {i} costs $5\n" for i in range(3)]
