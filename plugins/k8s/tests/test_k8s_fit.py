"""cmx-k8s fit for a real cluster: `cmx sweep --executor-opt render=DIR` renders every point's
manifests (validated against the Kubernetes 1.37 schema, offline) and applies nothing; every
pod has CPU and memory requests and limits; the cache claim is ReadWriteMany; a sweep's locks
are packed into as many ConfigMaps as they need, each object within its size limit, and a point
too large for any ConfigMap is a one-line error; points of different shapes get an Indexed Job
each (against the STAND-IN API server, standin.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import standin
import yaml

from cmx_core.api import SweepRequest, run_sweep
from cmx_core.errors import UsageError
from cmx_core.testing import execution_context, execution_request
from cmx_core.testing.cli import main
from cmx_core.testing.runs import ExecutorChoice, engine, paths
from cmx_k8s import manifests
from cmx_k8s.settings import K8sSettings
from cmx_k8s.sweep import shapes
from tests.test_sweep_resume import POINTS, SQUARE, resumed_equals_uninterrupted

FACTS = Path(__file__).resolve().parents[3] / "examples" / "facts" / "h100-sxm-8x.json"

SIZED = """\
name: test-k8s-fit-{name}
tags: [test, k8sfit, {name}]
summary: sorts nothing, with resources
inputs:
  n: {{type: integer, default: 1}}
outputs: [n]
resources: {{cpus: {cpus}, memory: {memory}}}
steps:
  - uses: shell
    with: {{cmd: [sh, -c, "echo n={{{{ inputs.n }}}}"], parse: kv}}
"""


def _load(path: Path) -> dict[str, Any]:
    value = yaml.safe_load(path.read_text())
    assert isinstance(value, dict)
    return value


def _valid(item: dict[str, Any]) -> None:
    kubernetes_validate.validate(item, manifests.SCHEMA_VERSION, strict=True)


def _resources(job: dict[str, Any]) -> dict[str, Any]:
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert isinstance(resources, dict)
    return resources


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_3_point_sweep_renders_three_validated_point_manifests(cmx_home: Path, capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "render"
    code, stdout, stderr = _cli(capsys, "sweep", "--tags=demo,sort", "--matrix", "size=3,4,5", "--executor", "k8s",
                                "--executor-opt", f"render={out}", "--executor-opt", "image=img:1", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["points"] == 3
    for index in range(3):
        point = out / f"point-{index}"
        job = _load(point / "job.yaml")
        for name in ("job.yaml", "configmap.yaml", "persistentvolumeclaim.yaml"):
            _valid(_load(point / name))
        assert set(_resources(job)["requests"]) == {"cpu", "memory"} == set(_resources(job)["limits"])
        lock = json.loads((point / "lock.json").read_text())
        assert lock["query"]["inputs"]["size"] == str(3 + index)
    indexed = _load(out / "sweep-0" / "job.yaml")
    _valid(indexed)
    assert indexed["spec"]["completions"] == 3 and indexed["spec"]["completionMode"] == "Indexed"
    assert set(_resources(indexed)["requests"]) == {"cpu", "memory"}
    assert sorted(_load(out / "sweep-0" / "configmap.yaml")["data"]) == ["lock-0.json", "lock-1.json", "lock-2.json"]
    assert not (paths.data_dir() / "sweeps").exists()  # nothing was applied, run or recorded


def test_a_200_point_sweep_renders_within_every_size_limit(cmx_home: Path, capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    out = tmp_path / "render"
    sizes = ",".join(str(n) for n in range(1, 201))
    code, _, stderr = _cli(capsys, "sweep", "--tags=demo,sort", "--matrix", f"size={sizes}",
                           "--executor", "k8s", "--executor-opt", f"render={out}", "--executor-opt", "image=img:1",
                           "--json")
    assert code == 0, stderr
    assert len(list(out.glob("point-*/job.yaml"))) == 200
    for path in (out / "sweep-0").glob("*.yaml"):
        item = _load(path)
        _valid(item)
        assert len(json.dumps(item).encode()) <= manifests.OBJECT_LIMIT
        if item["kind"] == "ConfigMap":
            assert sum(len(k) + len(v.encode()) for k, v in item["data"].items()) <= manifests.CONFIG_MAP_DATA_LIMIT
            # what a client-side kubectl apply takes: its last-applied-configuration annotation, 256 KiB
            assert len(json.dumps(item, separators=(",", ":")).encode()) < 256 * 1024
    keys = {k for path in (out / "sweep-0").glob("configmap*.yaml") for k in _load(path)["data"]}
    assert keys == {f"lock-{i}.json" for i in range(200)}
    assert len(list((out / "sweep-0").glob("configmap*.yaml"))) > 1  # 200 locks do not fit one under 256 KiB


def test_large_locks_are_packed_into_several_config_maps() -> None:
    locks = [json.dumps({"point": i, "pad": "x" * 25_000}) for i in range(200)]  # ~25 KB a point, as measured
    built = manifests.sweep_manifests(manifests.JobSpec("cmx-sweep-big", "img:1", manifests.sweep_command(["cmx"])),
                                      locks, K8sSettings(pvc=""))
    manifests.validate(built)  # sizes and schema
    assert len(built.config_maps) == 23  # 5 MB of locks: 23 ConfigMaps of 9 locks (under 256 KiB) each
    assert all(len(json.dumps(c, separators=(",", ":")).encode()) < 256 * 1024 for c in built.config_maps)
    data = {k: v for item in built.config_maps for k, v in item["data"].items()}
    assert data == {f"lock-{i}.json": text for i, text in enumerate(locks)}
    volume = next(v for v in built.job["spec"]["template"]["spec"]["volumes"] if v["name"] == "inputs")
    assert [s["configMap"]["name"] for s in volume["projected"]["sources"]] == \
        [c["metadata"]["name"] for c in built.config_maps]


def test_a_point_too_large_for_a_config_map_is_a_one_line_error() -> None:
    locks = ["{}", json.dumps({"pad": "x" * 1_000_000})]
    with pytest.raises(UsageError, match=r"point 1's lock is \d+ bytes, more than a ConfigMap holds") as caught:
        manifests.sweep_manifests(manifests.JobSpec("cmx-sweep-huge", "img:1", manifests.sweep_command(["cmx"])),
                                  locks, K8sSettings(pvc=""))
    assert "\n" not in str(caught.value)
    big = json.dumps({"pad": "x" * 1_100_000})
    single = manifests.run_manifests(manifests.JobSpec("cmx-huge", "img:1", ("cmx",)), big, K8sSettings(pvc=""))
    with pytest.raises(UsageError, match=r"over the 1048576-byte ConfigMap limit"):
        manifests.validate(single)


def test_every_pod_requests_and_limits_cpu_and_memory(cmx_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "gpu"
    engine.plan_view("mlperf,llama,h100", facts_file=FACTS, executor="k8s",
                     options={"render": str(out), "image": "img:1"})
    resources = _resources(_load(out / "job.yaml"))
    assert resources["limits"]["nvidia.com/gpu"] == 8  # the 8-GPU pod is no longer BestEffort
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == manifests.DEFAULT_CPU
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == manifests.DEFAULT_MEMORY


def test_the_cache_claim_is_shared_by_pods_on_different_nodes(cmx_home: Path) -> None:
    claim = manifests.pvc_manifest(K8sSettings())
    assert claim is not None and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    _valid(claim)
    volumes = manifests.job_manifest(manifests.JobSpec("cmx-x", "img:1", ("cmx",)), K8sSettings(pvc=""))["spec"][
        "template"]["spec"]["volumes"]
    assert {v["name"]: v for v in volumes}["cache"] == {"name": "cache", "emptyDir": {}}  # pvc= : one per pod
    assert {v["name"]: v for v in volumes}["work"] == {"name": "work", "emptyDir": {}}  # a work volume per point
    with pytest.raises(UsageError, match=r"pvc_access_mode='Everywhere': use one of ReadWriteMany"):
        engine.plan("demo,sort", executor="k8s", options={"image": "img:1", "pvc_access_mode": "Everywhere"})


def _sized(folder: Path, name: str, cpus: int, memory: str) -> None:
    (folder / f"{name}.yaml").write_text(SIZED.format(name=name, cpus=cpus, memory=memory))


def test_points_of_different_shapes_get_a_job_each(cluster: tuple[Path, standin.StandIn], cmx_home: Path,
                                                   tmp_path: Path) -> None:
    kubeconfig, state = cluster
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    _sized(recipes, "small", 1, "256M")
    _sized(recipes, "large", 2, "512M")
    session = engine.open_session([recipes])
    options = {"kubeconfig": str(kubeconfig), "image": "cmx-python:standin", "python": sys.executable,
               "cmx": f"{sys.executable} -m cmx_core", "poll_s": "0.2", "pvc": ""}
    plans = [engine.plan_in(session, f"test,k8sfit,{name}", {"n": str(i)}, ExecutorChoice("k8s", options))
             for i, name in enumerate(["small", "large", "small"])]
    chosen = session.registry.executors["k8s"]
    settings = engine.executor_settings(chosen, options)
    assert isinstance(settings, K8sSettings)
    groups = shapes([execution_context(plan, settings) for plan in plans], settings)
    assert [(g.settings.cpus, g.settings.memory, g.indices) for g in groups] == [("1", "256Mi", (0, 2)),
                                                                                 ("2", "512Mi", (1,))]
    requests = [execution_request(plan, tmp_path / f"run-{i}", settings=settings) for i, plan in enumerate(plans)]
    assert chosen.run_many is not None
    outcomes = chosen.run_many(requests, 2)
    assert [o.error for o in outcomes] == [None, None, None]
    assert [o.root_outputs.get("n") for o in outcomes] == ["0", "1", "2"]  # back in request order
    jobs = [body for body in state.created if body.get("kind") == "Job"]
    assert sorted((_resources(j)["requests"]["cpu"], j["spec"]["completions"]) for j in jobs) == [("1", 2), ("2", 1)]



PAUSE = """\
name: test-k8s-fit-pause
tags: [test, k8sfit, pause]
summary: sleeps for its input
inputs:
  pause: {type: number, default: 0}
steps:
  - uses: shell
    with: {cmd: [sleep, "{{ inputs.pause }}"]}
"""


def test_each_point_of_a_batch_records_its_own_wall_time(cluster: tuple[Path, standin.StandIn], cmx_home: Path,
                                                          tmp_path: Path) -> None:
    kubeconfig, _ = cluster
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "pause.yaml").write_text(PAUSE)
    options = {"kubeconfig": str(kubeconfig), "image": "cmx-python:standin", "python": sys.executable,
               "cmx": f"{sys.executable} -m cmx_core", "poll_s": "0.2", "pvc": ""}
    run_options = ["--recipes", str(recipes), "--executor", "k8s",
                   *[a for k, v in options.items() for a in ("--executor-opt", f"{k}={v}")]]
    # -j 1: the second point starts when the first has slept 2 s; its own time does not include that
    result = run_sweep(SweepRequest("test,k8sfit,pause", {}, [{"pause": "2"}, {"pause": "0"}],
                                    data_dir=paths.data_dir(), jobs=1, run_options=run_options))
    assert result.failed == 0, [p.message for p in result.points]
    slow, quick = result.points
    assert slow.wall_s >= 2.0 > quick.wall_s
    for point in result.points:
        timing = json.loads(Path(str(point.result_path)).read_text())["timing"]
        assert abs(timing["wall_s"] - point.wall_s) < 0.01  # the stored result says the same


def test_a_k8s_sweep_killed_halfway_then_resumed_equals_an_uninterrupted_one(
        cluster: tuple[Path, standin.StandIn], cmx_home: Path, tmp_path: Path) -> None:
    """Each point is recorded as its index ends (the executor's ``run_each``), so a driver
    killed with SIGKILL mid-Job loses none that had ended; the resume runs the rest in a new
    Job (the old Job's pods are the stand-in's to stop)."""
    kubeconfig, _ = cluster
    (tmp_path / "square.yaml").write_text(SQUARE)
    options = {"kubeconfig": str(kubeconfig), "image": "cmx-python:standin", "python": sys.executable,
               "cmx": f"{sys.executable} -m cmx_core", "poll_s": "0.2", "pvc": ""}
    args = ["sweep", "--tags=test,sweep,square", "--recipes", str(tmp_path), "--no-cache", "--executor", "k8s",
            *[a for k, v in options.items() for a in ("--executor-opt", f"{k}={v}")], "-j", "1",
            "--matrix", "n=" + ",".join(str(n) for n in range(1, POINTS + 1)), "--json"]
    resumed_equals_uninterrupted(args, timeout_s=300)
