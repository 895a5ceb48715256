"""The same code against Podman's Docker-compatible socket (``podman system service``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_docker.build import ensure_image
from cmx_docker.engine import probe, sdk_client

# Podman's default ulimits exceed the hard limits root may set here ("error setting rlimit
# type 7"); a private containers.conf lowers them without touching system files.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=20000:20000"]\n'
TINY = "base: {local: cmx-base:bookworm-minbase}\ninstall_cmx: false\nbuild_network: false\n"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"podman required in CI: {reason}")
    pytest.skip(reason)


def _install_podman() -> str | None:
    if shutil.which("podman"):
        return None
    if os.geteuid() != 0:
        return "podman is not installed and this user cannot apt-get install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.run(["apt-get", "install", "-y", "-qq", "podman"], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    return None if proc.returncode == 0 else f"apt-get install podman failed: {proc.stderr.strip()[-200:]}"


@pytest.fixture(scope="module")
def podman(engine) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A private Podman service; DOCKER_HOST points at it for the module's tests. The base is
    imported from the cached rootfs tarball into Podman only: this file runs beside the
    Docker group (conftest.py), whose first-run test removes the base from the shared engine
    for a while, so nothing here may import it there."""
    problem = _install_podman()
    if problem:
        _unavailable(problem)
    work = Path(tempfile.mkdtemp(prefix="cmxp-"))
    (work / "containers.conf").write_text(CONTAINERS_CONF)
    url = f"unix://{work}/podman.sock"
    env = {**os.environ, "CONTAINERS_CONF": str(work / "containers.conf")}
    log = (work / "podman.log").open("wb")
    proc = subprocess.Popen(["podman", "--root", str(work / "store"), "--runroot", str(work / "run"),
                             "system", "service", "--time=0", url], stdout=log, stderr=subprocess.STDOUT, env=env)
    saved = os.environ["DOCKER_HOST"]
    try:
        # bounded, not timed: the service's first start initialises its store, which takes
        # long on a busy machine; only an exit or 10 minutes without an answer is a failure
        deadline = time.monotonic() + 600
        while probe(url, timeout=120.0) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                _unavailable(f"podman system service (exit {proc.poll()}) did not answer: "
                              f"{(work / 'podman.log').read_text()[-300:]}")
            time.sleep(0.2)
        os.environ["DOCKER_HOST"] = url
        from cmx_docker.base import ensure_base
        from cmx_docker.engine import find_endpoint

        endpoint = find_endpoint()
        ensure_base(endpoint, _tarball_dir())
        yield endpoint
    finally:
        os.environ["DOCKER_HOST"] = saved
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        subprocess.run(["podman", "--root", str(work / "store"), "--runroot", str(work / "run"), "system", "reset",
                        "--force"], capture_output=True, timeout=120, check=False, env=env)
        shutil.rmtree(work, ignore_errors=True)


def _tarball_dir() -> Path:
    cache_root = os.environ.get("CMX_TEST_CACHE")
    return Path(cache_root) if cache_root else Path(os.environ["CMX_HOME"]) / "rootfs"


def test_podman_is_detected_and_builds_content_addressed(podman, make_template) -> None:  # type: ignore[no-untyped-def]
    assert podman.kind == "podman"
    token = uuid.uuid4().hex
    folder = make_template("podtiny", "FROM {{ base }}\nCOPY data.txt /data.txt\n",
                           TINY + "context: [data.txt]\n", {"data.txt": token})
    first = ensure_image("podtiny", endpoint=podman)
    again = ensure_image("podtiny", endpoint=podman)
    assert first.built and not again.built and first.runtime.startswith("podman ")
    (folder / "data.txt").write_text(token + "-changed")
    changed = ensure_image("podtiny", endpoint=podman)
    assert changed.built and changed.tag != first.tag
    client = sdk_client(podman)
    try:
        out = client.containers.run(changed.tag, ["cat", "/data.txt"], remove=True, network_mode="none")
    finally:
        client.close()
    assert out.decode() == token + "-changed"


def test_detect_os_runs_in_a_podman_container(podman) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import run

    result = run("detect,os", executor="docker")
    container = result.document["system"]["container"]
    assert container["runtime"].startswith("podman ") and container["image"].startswith("cmx-python:")
    assert result.document["system"]["os"]["distro"] == "Debian GNU/Linux"
    assert json.loads((result.run_dir / "container.json").read_text())["run"]["network"] is False


def test_podman_gpu_request_without_a_cdi_spec_is_refused(podman, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from cmx_core.api import UsageError, plan
    from cmx_docker.gpus import CDI_DIRS, cdi_devices

    if cdi_devices("all", CDI_DIRS) is not None:
        pytest.skip("this machine has an nvidia.com/gpu CDI spec: the refusal cannot be shown here")
    with pytest.raises(UsageError, match=r"GPUs requested \(gpus=all\) but podman .* has no CDI spec for "
                                         r"nvidia.com/gpu under /etc/cdi or /var/run/cdi; generate one"):
        plan("detect,os", executor="docker", options={"gpus": "all"})
