"""A multi-node training run on Kubernetes is ``cmx run ... --executor k8s`` with ``launcher:
torchrun``: the k8s executor renders it through its one manifest builder (``cmx_k8s.manifests``,
the builder of every suite: ConfigMap with the lock, PVC, headless Service, Indexed Job of one
pod per node, each validated against the Kubernetes schema), and in each pod the registered
``torchrun`` launcher turns the rank layout the executor gave the pod into torchrun's c10d
options. ``cmx train-k8s`` and its builder of its own are gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx_core.testing import registered_launchers
from cmx_train.config import parse
from cmx_train.launch import free_port, plan_launch

from .conftest import two_nodes_trained
from .test_train_user_script import SCRIPT

pytest.importorskip("cmx_k8s", reason="the k8s executor is cmx-k8s's")
pytest.importorskip("kubernetes_validate", reason="the manifests are validated with kubernetes-validate")

TAGS = "--tags=train,throughput,resnet50,cuda,bf16,torchrun"


def _render(cli: Any, out: Path, *options: str) -> dict[str, Any]:
    proc = cli("plan", "recipe", TAGS, "--nodes=2", "--nproc=8", "--batch-size=2048", "--executor=k8s",
               "--executor-opt", f"render={out}", "--executor-opt", "nodes=2", "--executor-opt", "image=img:1",
               "--executor-opt", "gpus=8", "--executor-opt", "gpu_product=NVIDIA-H100-80GB-HBM3", *options, "--json")
    assert proc.returncode == 0, proc.stderr
    return {p.stem: yaml.safe_load(p.read_text()) for p in out.glob("*.yaml")}


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in container["env"]}


def _inputs_of(lock: Any) -> list[dict[str, Any]]:
    """Every ``inputs`` mapping in the lock (wherever its format keeps them)."""
    found: list[dict[str, Any]] = []
    if isinstance(lock, dict):
        if isinstance(lock.get("inputs"), dict):
            found.append(lock["inputs"])
        for value in lock.values():
            found += _inputs_of(value)
    elif isinstance(lock, list):
        for value in lock:
            found += _inputs_of(value)
    return found


def test_two_nodes_by_eight_gpus_render_through_the_k8s_executor(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    objects = _render(cli, out)
    assert sorted(objects) == ["configmap", "job", "persistentvolumeclaim", "service"]
    job, svc, cm = objects["job"], objects["service"], objects["configmap"]
    name = job["metadata"]["name"]
    assert job["metadata"]["labels"]["cmx.dev/run"] == name  # cmx_k8s.manifests' own label: the one builder
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    assert job["spec"]["parallelism"] == 2
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"] == {"job-name": name}
    env = _env(container)
    assert env["MASTER_ADDR"] == f"{name}-0.{svc['metadata']['name']}" and env["MASTER_PORT"] == "29500"
    assert env["CMX_NODE_RANK"] == {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    lock = json.loads(cm["data"]["lock.json"])
    assert lock == json.loads((out / "lock.json").read_text())
    assert any(i.get("launcher") == "torchrun" and i.get("nodes") == 2 and i.get("nproc") == 8
               for i in _inputs_of(lock))


def test_each_pod_runs_torchrun_on_the_layout_the_executor_gave_it(cli: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    objects = _render(cli, tmp_path / "manifests")
    env = _env(objects["job"]["spec"]["template"]["spec"]["containers"][0])
    for key in ("MASTER_ADDR", "MASTER_PORT", "CMX_JOB_ID"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setenv("CMX_NODE_RANK", "1")  # what Kubernetes puts in pod 1
    config = parse({"model": "resnet50", "nodes": 2, "nproc": 8, "batch_size": 2048, "device": "cuda",
                    "backend": "nccl", "launcher": "torchrun"})
    launch = plan_launch(config, tmp_path / "c.json", tmp_path, registered_launchers())
    argv = list(launch.argv)
    endpoint = f"{env['MASTER_ADDR']}:{int(env['MASTER_PORT']) + 1}"
    assert "--nnodes=2" in argv and "--nproc-per-node=8" in argv and "--rdzv-backend=c10d" in argv
    assert f"--rdzv-endpoint={endpoint}" in argv and f"--rdzv-id={env['CMX_JOB_ID']}" in argv
    assert launch.launcher == "torchrun" and launch.rendezvous == f"c10d {endpoint}"


def test_a_sweep_refuses_several_nodes_in_one_line(cli: Any, tmp_path: Path) -> None:
    proc = cli("sweep", TAGS, "--nproc=8", "--matrix", "batch_size=2048,4096", "--executor=k8s",
               "--executor-opt", f"render={tmp_path}", "--executor-opt", "nodes=2", "--executor-opt", "image=img:1")
    assert proc.returncode == 2 and "nodes=2: a sweep runs each point as one pod" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("options", "cpu", "memory"), [((), None, None),
                                                         (("--executor-opt=cpus=16", "--executor-opt=memory=64Gi"),
                                                          "16", "64Gi")])
def test_the_training_pods_are_admitted_with_cpu_and_memory(cli: Any, tmp_path: Path, options: tuple[str, ...],
                                                            cpu: str | None, memory: str | None) -> None:
    """#44 item 6: what a training run renders passes ``kubernetes-validate --strict`` (the
    package's command, on the files), each pod asks for and is limited to CPU and memory (the
    executor's defaults, or ``--executor-opt cpus=/memory=``), and its Job has a
    ``podFailurePolicy``."""
    out = tmp_path / "manifests"
    objects = _render(cli, out, *options)
    checked = subprocess.run([str(Path(sys.executable).with_name("kubernetes-validate")), "--strict", "--quiet",
                              *map(str, sorted(out.glob("*.yaml")))], capture_output=True, text=True, timeout=300,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    job = objects["job"]
    assert job["spec"]["podFailurePolicy"]["rules"]
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    for key in ("cpu", "memory"):
        assert resources["requests"][key] == resources["limits"][key]
    if cpu is not None:
        assert (resources["limits"]["cpu"], resources["limits"]["memory"]) == (cpu, memory)


def _standin() -> Any:
    """The Kubernetes API STAND-IN of cmx-k8s's tests (no real cluster can run here): its
    kubelet runs each pod's command on this machine, and its cluster DNS names the pods of
    an Indexed Job behind a headless Service."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "k8s" / "tests"))
    import standin  # type: ignore[import-not-found]

    return standin


def _two_pods(cli: Any, tmp_path: Path, *inputs: str, mode: str = "throughput"
              ) -> tuple[subprocess.CompletedProcess[str], Any]:
    """A ``nodes.2`` throughput run through the k8s executor against the loopback API
    stand-in; the run and the stand-in's record of what was created and deleted."""
    standin = _standin()
    root = tmp_path / "standin"
    root.mkdir()
    server, state = standin.serve(root)
    try:
        kubeconfig = standin.kubeconfig(tmp_path / "kubeconfig", server.server_address[1])
        options = {"kubeconfig": str(kubeconfig), "image": "cmx-python:standin", "python": sys.executable,
                   "cmx": f"{sys.executable} -m cmx_core", "poll_s": "0.2", "nodes": "2",
                   "master_port": str(free_port()), "pvc": ""}
        # the two pods start their cmx runs side by side; on a loaded machine pod 1 reached the
        # rendezvous more than 120 s after pod 0 (run g), so the rendezvous waits up to 5 minutes
        proc = cli("run", "recipe", f"--tags=train,{mode},nodes.2", *inputs, "--threads-per-rank=1",
                   "--rdzv-timeout-s=300", "--timeout-s=600", "--executor=k8s",
                   *(f"--executor-opt={k}={v}" for k, v in options.items()), "--json", timeout=900)
    finally:
        state.stop_all()
        server.shutdown()
        server.server_close()
    return proc, state


def test_two_pods_train_with_a_rank_each_and_the_result_comes_back(cli: Any, as_json: Any, tmp_path: Path) -> None:
    """#45 item 5: a 2-node run through the k8s executor (the real ``kubernetes`` client, the
    one manifest builder, an Indexed Job of 2 pods behind a headless Service) trains with one
    rank in each pod, meeting at pod 0 by its cluster-DNS name, and node 0's result comes back
    framed in its pod log."""
    proc, state = _two_pods(cli, tmp_path, "--batch-size=32", "--steps=3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = as_json(proc)
    section = two_nodes_trained(result)
    name = next(c for c in state.created if c["kind"] == "Job")["metadata"]["name"]
    assert sorted(r["host"] for r in section["ranks"]) == [f"{name}-0", f"{name}-1"]  # each pod's own hostname
    assert section["rendezvous"].split()[-1].rsplit(":", 1)[0] == f"{name}-0.{name}-nodes"
    assert len(state.deleted[name].pods) == 2


def test_a_users_script_on_two_pods_brings_every_ranks_report_to_node_0(cli: Any, as_json: Any,
                                                                         tmp_path: Path) -> None:
    """#45 item 1 on several nodes: the user's own script runs a rank in each pod; each pod's
    ranks report in that pod, and the other pod's step sends its ranks' reports to node 0's
    step (a TCPStore on master_port + 2), so node 0's result has both ranks' figures."""
    script = tmp_path / "my_train.py"
    script.write_text(SCRIPT)
    proc, state = _two_pods(cli, tmp_path, f"--script={script}", "--script-args=20 2 16", "--warmup-steps=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = two_nodes_trained(as_json(proc))
    name = next(c for c in state.created if c["kind"] == "Job")["metadata"]["name"]
    assert sorted(r["host"] for r in section["ranks"]) == [f"{name}-0", f"{name}-1"]  # a rank reported in each pod
    assert all(r["samples"] == 20 * 16 for r in section["ranks"])  # the timed steps of each rank
    assert section["script"]["args"] == ["20", "2", "16"]




def test_a_time_to_accuracy_run_on_two_pods_brings_the_mlperf_log_to_node_0(cli: Any, as_json: Any,
                                                                            tmp_path: Path) -> None:
    """The MLPerf log is written by global rank 0, which torchrun's c10d rendezvous may give to
    either pod; the pod that holds it sends it to node 0's step, so the result has it and its
    compliance record wherever rank 0 ran."""
    proc, _ = _two_pods(cli, tmp_path, "--target-accuracy=0.9", "--batch-size=32", "--max-epochs=15",
                        mode="time-to-accuracy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = as_json(proc)
    section = two_nodes_trained(result)
    assert section["converged"] is True and section["compliance"]["ruleset"] == "training 6.1.0"
    assert any(a["kind"] == "mlperf_log" for a in result["artifacts"])
