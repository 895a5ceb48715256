"""Fixtures: the real bubblewrap sandbox (installed when root), the shipped problem and its
solutions, a private CMX_HOME, and for the docker judge a real engine (the one DOCKER_HOST
names, else a private dockerd this session starts and stops by PID)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_alebench.problem import Problem, find_problem


def unavailable(reason: str) -> None:
    """Skip with the reason; under CI a missing tool is a failure instead."""
    if os.environ.get("CI"):
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def _apt(*packages: str) -> None:
    """``apt-get install``, after ``apt-get update`` when the first try fails (a fresh machine
    has no package lists)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", *packages]
    if subprocess.run(install, capture_output=True, env=env, timeout=600, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=600, check=False)
        subprocess.run(install, capture_output=True, env=env, timeout=600, check=False)


@pytest.fixture(scope="session")
def sandbox_ready() -> None:
    if shutil.which("bwrap") is None and os.geteuid() == 0:
        _apt("bubblewrap")
    from cmx_core.api import get_sandbox

    problem = get_sandbox("bubblewrap").available()
    if problem:
        unavailable(f"the bubblewrap sandbox cannot run here: {problem}")


@pytest.fixture(scope="session")
def libraries_installed() -> None:
    """Boost, Eigen and GMP headers for the judge toolchain (installed with apt when root)."""
    from cmx_alebench import toolchain

    def ready() -> bool:
        return bool(toolchain.boost_version() and toolchain.eigen_version() and toolchain.gmp_version())

    if not ready() and os.geteuid() == 0:
        _apt("libboost-dev", "libeigen3-dev", "libgmp-dev")
    if not ready():
        unavailable("libboost-dev, libeigen3-dev and libgmp-dev are needed for the judge toolchain test")


@pytest.fixture(scope="session")
def judge_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The ale-bench-judge image on the engine DOCKER_HOST names: CMX_ALEBENCH_JUDGE_IMAGE when
    set, else built here by cmx-docker (``ensure_image``) on the debootstrap base, whose rootfs
    is cached under CMX_TEST_CACHE when set (scripts/test.sh sets it)."""
    image = os.environ.get("CMX_ALEBENCH_JUDGE_IMAGE", "")
    if not os.environ.get("DOCKER_HOST"):
        unavailable("no Docker engine: DOCKER_HOST names none (scripts/test.sh starts one as root)")
    if image:
        return image
    from cmx_docker.base import ensure_base
    from cmx_docker.build import ensure_image
    from cmx_docker.engine import find_endpoint
    from cmx_docker.errors import ImageUnavailable

    home = tmp_path_factory.mktemp("judge-image-home")
    cache = Path(os.environ.get("CMX_TEST_CACHE") or home / "rootfs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CMX_HOME", str(home))
        try:
            endpoint = find_endpoint()
            ensure_base(endpoint, cache)
            return ensure_image("ale-bench-judge", endpoint=endpoint).tag
        except ImageUnavailable as exc:
            unavailable(f"cannot build the ale-bench-judge image: {exc}")
            raise


DEBIAN_RUST = ("cargo", "rustc", "librust-rand-dev", "librust-rand-chacha-dev", "librust-itertools-dev")


@pytest.fixture(scope="session")
def debian_rust() -> None:
    """Debian's cargo and the librust-*-dev crates cmx002's tools need (installed with apt when root)."""
    from cmx_alebench.problem import shipped_dir
    from cmx_alebench.rust_build import DEBIAN_REGISTRY, missing_crates

    def ready() -> bool:
        manifest = shipped_dir() / "cmx002" / "tools" / "Cargo.toml"
        return Path("/usr/bin/cargo").is_file() and not missing_crates(manifest, DEBIAN_REGISTRY)

    if not ready() and os.geteuid() == 0:
        _apt(*DEBIAN_RUST)
    if not ready():
        unavailable(f"Debian's {', '.join(DEBIAN_RUST)} are needed to build cmx002's tools")


@pytest.fixture(scope="session")
def crates_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Debian's packages of AtCoder's crates installed (apt, when root), and a cache to build them in."""
    from cmx_alebench.languages import rust_sysroot
    from cmx_alebench.rust_build import DEBIAN_REGISTRY, available_crates
    from cmx_alebench.rust_crates import BOOKWORM_PACKAGED, debian_package

    if rust_sysroot() is None:
        unavailable("rustc is not on PATH: Rust is judged only where a toolchain is present")
    wanted = [c for c in BOOKWORM_PACKAGED if c.replace("_", "-") not in available_crates(DEBIAN_REGISTRY)]
    if wanted and os.geteuid() == 0:
        _apt("cargo", *(debian_package(c) for c in wanted))
    left = [c for c in BOOKWORM_PACKAGED if c.replace("_", "-") not in available_crates(DEBIAN_REGISTRY)]
    if left:
        unavailable(f"Debian's packages of {', '.join(left)} are not installed (apt-get install "
                    f"{' '.join(debian_package(c) for c in left[:3])} ...)")
    shared = os.environ.get("CMX_TEST_CACHE")  # scripts/test.sh keeps built things there between runs
    return Path(shared) if shared else tmp_path_factory.mktemp("crates-cache")


@pytest.fixture(scope="session")
def problem() -> Problem:
    return find_problem("cmx001", [])


@pytest.fixture(scope="session")
def input_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("alebench-cache")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CMX_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _probe(url: str) -> bool:
    try:
        import docker

        client = docker.DockerClient(base_url=url, timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means "not there"
        return False


def _start_dockerd(work: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    if shutil.which("dockerd") is None:
        if os.geteuid() != 0:
            return None, "dockerd is not installed"
        _apt("docker.io")
    if shutil.which("dockerd") is None:
        return None, "dockerd could not be installed"
    url = f"unix://{work}/docker.sock"
    log = (work / "dockerd.log").open("wb")
    proc = subprocess.Popen(["dockerd", "--data-root", str(work / "docker"), "--exec-root", str(work / "exec"),
                             "--pidfile", str(work / "dockerd.pid"), "--iptables=false", "--bridge=none",
                             "--host", url], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _probe(url):
            return proc, url
        if proc.poll() is not None:
            return None, f"dockerd exited with {proc.returncode}"
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    return None, "dockerd did not answer within 60 s"


def _unmount_below(work: Path) -> None:
    prefix = str(work.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, timeout=30, check=False)


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[str]:
    """DOCKER_HOST of a reachable engine, set for the session."""
    saved = os.environ.get("DOCKER_HOST")
    work = Path(tempfile.mkdtemp(prefix="cmxa-"))  # short: socket paths are limited
    proc = None
    try:
        url = saved or ""
        if not url or not _probe(url):
            proc, url = _start_dockerd(work)
            if proc is None:
                unavailable(f"no container engine: {url}")
        os.environ["DOCKER_HOST"] = url
        yield url
    finally:
        if saved is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = saved
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _unmount_below(work)
        shutil.rmtree(work, ignore_errors=True)

