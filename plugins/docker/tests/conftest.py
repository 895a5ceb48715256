"""Fixtures: a real container engine (the one DOCKER_HOST names, else a private dockerd this
session starts and stops by PID), the debootstrap base image, an isolated CMX_HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Secret-looking values present in the environment of every build and run of this session;
# test_docker_secrets asserts none of them reaches an image or a container config.
SECRETS = {
    "HF_TOKEN": "hf_cmxTestSecretValue0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "cmxTestAwsSecret/0123456789abcdefXYZ",
    "CMX_TEST_API_KEY": "sk-cmx-test-secret-0123456789",
}


def _unavailable(reason: str) -> None:
    """Skip with the reason; in CI (``CI`` set) a missing engine is a failure instead."""
    if os.environ.get("CI"):
        pytest.fail(f"container engine required in CI: {reason}")
    pytest.skip(reason)


def _install() -> str | None:
    if shutil.which("dockerd") and shutil.which("debootstrap"):
        return None
    if os.geteuid() != 0:
        return "dockerd/debootstrap are not installed and this user cannot apt-get install them"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "docker.io", "debootstrap"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
        if proc.returncode != 0:
            return f"{' '.join(cmd)} failed: {proc.stderr.strip().splitlines()[-1:]}"
    return None


def _start_dockerd(work: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    """(process, url) of a private dockerd, or (None, reason)."""
    from cmx_docker.engine import probe

    problem = _install()
    if problem:
        return None, problem
    url = f"unix://{work}/docker.sock"
    log = (work / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        ["dockerd", "--data-root", str(work / "docker"), "--exec-root", str(work / "exec"),
         "--pidfile", str(work / "dockerd.pid"), "--iptables=false", "--bridge=none",
         "--host", url], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if probe(url) is not None:
            return proc, url
        if proc.poll() is not None:
            tail = (work / "dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
            return None, f"dockerd exited with {proc.returncode}: {' | '.join(tail)}"
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    return None, "dockerd did not answer within 60 s"


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A reachable engine endpoint; CMX_HOME and the secret values are set for the session."""
    from cmx_docker import engine as engine_mod

    saved = {k: os.environ.get(k) for k in ("DOCKER_HOST", "CMX_HOME", *SECRETS)}
    proc = None
    work = Path(tempfile.mkdtemp(prefix="cmxd-"))  # short: socket paths are limited
    try:
        url = os.environ.get("DOCKER_HOST")
        if not url or engine_mod.probe(url) is None:
            proc, url_or_reason = _start_dockerd(work)
            if proc is None:
                _unavailable(f"no container engine: {url_or_reason}")
            url = url_or_reason
        os.environ["DOCKER_HOST"] = url
        os.environ["CMX_HOME"] = str(tmp_path_factory.mktemp("cmx-home"))
        os.environ.update(SECRETS)
        yield engine_mod.find_endpoint()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        unmount_below(work)
        shutil.rmtree(work, ignore_errors=True)


def unmount_below(work: Path) -> None:
    """Unmount what a stopped daemon left mounted under ``work`` (dockerd keeps its
    ``exec/netns/default`` namespace mount), deepest first."""
    prefix = str(work.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, timeout=30, check=False)


@pytest.fixture(scope="session")
def base_image(engine: object) -> object:
    """The debootstrap base (rootfs tarball cached under CMX_TEST_CACHE when set)."""
    from cmx_docker.base import ensure_base
    from cmx_docker.errors import ImageUnavailable

    cache_root = os.environ.get("CMX_TEST_CACHE")
    cache = Path(cache_root) if cache_root else Path(os.environ["CMX_HOME"]) / "rootfs"
    try:
        return ensure_base(engine, cache)  # type: ignore[arg-type]
    except ImageUnavailable as exc:
        _unavailable(f"cannot build the debootstrap base image: {exc}")
        raise


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated CMX_HOME for tests that need no engine."""
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def template_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private templates directory searched before containers/ (CMX_CONTAINERS_PATH)."""
    folder = tmp_path / "containers"
    folder.mkdir()
    monkeypatch.setenv("CMX_CONTAINERS_PATH", str(folder))
    return folder


@pytest.fixture
def make_template(template_dir: Path):  # type: ignore[no-untyped-def]
    """``make_template(name, dockerfile, meta, files)`` creates a template in template_dir."""

    def make(name: str, dockerfile: str, meta: str, files: dict[str, str] | None = None) -> Path:
        target = template_dir / name
        target.mkdir(parents=True, exist_ok=True)
        (target / "Dockerfile.j2").write_text(dockerfile)
        (target / "template.yaml").write_text(meta)
        for rel, text in (files or {}).items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_text(text)
        return target

    return make
