"""Every failure of the docker executor is an error result on the host, and no container is
left behind: build, start, timeout, OOM, engine errors, GPU requests, a SIGKILLed cmx."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from cmx_docker.engine import sdk_client

SLEEPER = """
name: failure-sleeper
tags: [failure, sleeper]
summary: sleep long enough to be killed
steps:
  - uses: shell
    with: {cmd: [sleep, "300"]}
cache: false
"""

QUICK = """
name: failure-quick
tags: [failure, quick]
summary: print a line
steps:
  - uses: shell
    with: {cmd: [python3, -c, "print('x=1')"], parse: kv}
outputs: [x]
cache: false
"""

HOG = """
name: failure-hog
tags: [failure, hog]
summary: allocate far more memory than the limit
steps:
  - uses: shell
    with: {cmd: [python3, -c, "b = b'x' * (600 * 1024 * 1024); print(len(b))"]}
cache: false
"""


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    folder = tmp_path / "recipes"
    folder.mkdir()
    for name, text in (("sleeper", SLEEPER), ("quick", QUICK), ("hog", HOG)):
        (folder / f"{name}.yaml").write_text(text)
    return folder


def _containers(engine: Any, **labels: str) -> list[Any]:
    client = sdk_client(engine)
    try:
        wanted = [f"{k}={v}" if v else k for k, v in labels.items()] or ["org.cmx.owner-pid"]
        return list(client.containers.list(all=True, filters={"label": wanted}, ignore_removed=True))
    finally:
        client.close()


def _error_doc(err: pytest.ExceptionInfo[Any]) -> dict[str, Any]:
    doc = json.loads(Path(err.value.result_path).read_text())
    assert doc["status"] == "error", doc["status"]
    return doc


def _left_for(engine: Any, run_dir: Path) -> list[Any]:
    return _containers(engine, **{"org.cmx.run-dir": str(run_dir.resolve())})


def test_a_failing_build_is_an_error_result(engine, base_image, recipes: Path, make_template) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import StepFailed, run

    make_template("breaks", "FROM {{ base }}\nRUN echo build-fails-3c1 && false\n",
                  "base: {local: cmx-base:bookworm-minbase}\ninstall_cmx: false\nbuild_network: false\n")
    with pytest.raises(StepFailed) as err:
        run("failure,quick", recipes_dirs=[recipes], executor="docker", options={"container": "breaks"})
    doc = _error_doc(err)
    assert "build of cmx-breaks:" in doc["error"]["message"] and "build-fails-3c1" in doc["error"]["message"]


def test_a_container_that_cannot_start_is_an_error_result_and_is_removed(engine, base_image,  # type: ignore[no-untyped-def]
                                                                         recipes: Path) -> None:
    from cmx_core.api import StepFailed, run

    with pytest.raises(StepFailed) as err:  # more CPUs than any machine here has: the engine refuses
        run("failure,quick", recipes_dirs=[recipes], executor="docker", options={"cpus": "100000"})
    doc = _error_doc(err)
    assert "cannot start a container of cmx-python:" in doc["error"]["message"]
    assert "CPU" in doc["error"]["message"]
    assert _left_for(engine, Path(err.value.result_path).parent) == []


def test_a_bad_user_option_is_refused_with_one_line(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import UsageError, plan

    with pytest.raises(UsageError, match=r"user='root': use a non-root uid:gid like 1000:1000"):
        plan("failure,quick", recipes_dirs=[recipes], executor="docker", options={"user": "root"})


def test_a_gpu_request_without_the_nvidia_runtime_is_refused_at_plan_time(engine, base_image,  # type: ignore[no-untyped-def]
                                                                          recipes: Path) -> None:
    from cmx_core.api import UsageError, plan
    from cmx_docker.gpus import route

    with pytest.raises(UsageError, match=r"GPUs requested \(gpus=all\) but docker .* has no NVIDIA runtime "
                                         r"\(runtimes: .*runc.*\); install nvidia-container-toolkit"):
        plan("failure,quick", recipes_dirs=[recipes], executor="docker", options={"gpus": "all"})
    with pytest.raises(UsageError, match="no NVIDIA runtime"):
        route(engine, "1")


def test_a_gpu_start_failure_leaves_no_created_container(engine, base_image) -> None:  # type: ignore[no-untyped-def]
    """Past the plan-time check (an engine that loses its runtime), the engine's refusal to
    start is a ContainerFailed and the created container is removed."""
    from cmx_docker.build import ensure_image
    from cmx_docker.errors import ContainerFailed
    from cmx_docker.job import start_container
    from cmx_docker.runopts import RunOptions

    image = ensure_image("python", endpoint=engine)
    mark = uuid.uuid4().hex
    opts = RunOptions(image=image.image_id, command=("true",), user="1000:1000", mounts=(), environment={},
                      gpus="all", labels={"org.cmx.test": mark, "org.cmx.image": image.tag})
    with pytest.raises(ContainerFailed, match=r"cannot start a container of cmx-python:.*(gpu|GPU|nvidia|device)"):
        start_container(opts, engine, echo=False)
    assert _containers(engine, **{"org.cmx.test": mark}) == []


def test_timeout_and_oom_are_error_results_and_leave_no_container(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import StepFailed, run

    with pytest.raises(StepFailed) as err:
        run("failure,sleeper", recipes_dirs=[recipes], executor="docker", options={"timeout_s": "3"})
    assert "exceeded its time limit of 3 s" in _error_doc(err)["error"]["message"]
    assert _left_for(engine, Path(err.value.result_path).parent) == []
    with pytest.raises(StepFailed) as err:
        run("failure,hog", recipes_dirs=[recipes], executor="docker", options={"memory": "160m"})
    assert "OOM-killed (memory limit 160m)" in _error_doc(err)["error"]["message"]
    assert _left_for(engine, Path(err.value.result_path).parent) == []


def test_an_unreachable_engine_is_an_error_result(engine, base_image, recipes: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_core.api import StepFailed, run

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/gone.sock")
    with pytest.raises(StepFailed) as err:
        run("failure,quick", recipes_dirs=[recipes], executor="docker")
    assert f"no container engine reachable (tried unix://{tmp_path}/gone.sock)" in _error_doc(err)["error"]["message"]


def _cmx(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cmx_core.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def test_a_sigkilled_cmx_leaves_a_container_that_the_next_start_removes(engine, base_image,  # type: ignore[no-untyped-def]
                                                                       recipes: Path) -> None:
    proc = _cmx("run", "recipe", "--tags=failure,sleeper", "--container", "--recipes", str(recipes), "--json")
    deadline = time.monotonic() + 300  # bounded: the image may still need building
    mine: list[Any] = []
    while not mine and time.monotonic() < deadline and proc.poll() is None:
        mine = [c for c in _containers(engine, **{"org.cmx.owner-pid": str(proc.pid)}) if c.status == "running"]
        time.sleep(0.5)
    assert mine, f"no running container of cmx pid {proc.pid}: {proc.stderr.read() if proc.poll() is not None else ''}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert [c.id for c in _containers(engine, **{"org.cmx.owner-pid": str(proc.pid)})] == [mine[0].id]  # left behind
    done = subprocess.run([sys.executable, "-m", "cmx_core.cli.main", "run", "recipe", "--tags=failure,quick",
                           "--container", "--recipes", str(recipes), "--json"], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ), check=False)
    assert done.returncode == 0, done.stderr[-1500:]
    assert "left by a cmx process that is gone" in done.stderr
    assert _containers(engine, **{"org.cmx.owner-pid": str(proc.pid)}) == []
    assert _containers(engine) == []  # and nothing of the second run either


def test_a_root_run_leaves_root_owned_files_and_the_host_system(engine, base_image, recipes: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import run
    from cmx_core.testing.results import engine_git_commit

    result = run("failure,quick", recipes_dirs=[recipes], executor="docker")
    doc = result.document
    owners = {(p.lstat().st_uid, p.lstat().st_gid) for p in [result.run_dir, *result.run_dir.rglob("*")]}
    assert owners == {(os.geteuid(), os.getegid())}  # root's (or the user's) own, never uid 1000
    import socket

    assert doc["system"]["name"] == socket.gethostname()  # the host, not the container's random name
    assert doc["system"]["container"]["image"].startswith("cmx-python:")
    commit = engine_git_commit()
    assert commit and doc["software"]["engine"]["git_commit"] == commit
    record = json.loads((result.run_dir / "container.json").read_text())
    assert record["run"]["shm_size"] == "256m"
    if os.geteuid() == 0:
        assert record["run"]["user"] == "1000:1000"  # the image's user wrote them; they were handed back
