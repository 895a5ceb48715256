"""The sandbox judge on the judge image's root filesystem (``--judge_image=REF``): the image
(containers/ale-bench-judge) is exported once into the cmx cache keyed by its image ID, and the
compile, the cases and the tester run in bubblewrap with that root as ``/``, read-only, under
the sandbox's limits. A Boost and Eigen solution is ACCEPTED there, a memory hog is still MLE,
the result records the image; a missing image or engine is one line, exit 2."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cmx_alebench import judge_image as images
from cmx_alebench import toolchain
from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import Problem
from cmx_alebench.runner import Call, CallLimits
from cmx_alebench.rust_crates import BOOKWORM_PACKAGED, IMAGE_CRATES
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.step import parse
from cmx_alebench.verdicts import JudgeResult
from cmx_core.errors import StepFailed, UsageError

from .test_alebench_rust_crates import WITH_CRATES, WITH_PROCONIO
from .test_alebench_toolchain import LIBRARIES_CPP

SOLUTIONS = Path(__file__).parents[1] / "src" / "cmx_alebench" / "solutions"


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    buffer.seek(0)
    return buffer


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o4755 if kind == tarfile.REGTYPE else 0o755
    return info


def test_unpack_keeps_links_inside_and_drops_devices_and_setuid(tmp_path: Path) -> None:
    stream = _tar((_info("usr", tarfile.DIRTYPE), b""), (_info("usr/bin", tarfile.DIRTYPE), b""),
                  (_info("usr/bin/g++-12"), b"binary"), (_info("usr/bin/g++", tarfile.SYMTYPE, "g++-12"), b""),
                  (_info("etc", tarfile.DIRTYPE), b""),
                  (_info("etc/cc", tarfile.SYMTYPE, "/usr/bin/g++"), b""),   # absolute: resolved inside bwrap
                  (_info("/etc/absolute"), b"abs"),                              # a leading / is stripped
                  (_info("usr/bin/c++", tarfile.LNKTYPE, "usr/bin/g++-12"), b""),
                  (_info("dev", tarfile.DIRTYPE), b""), (_info("dev/console", tarfile.CHRTYPE), b""))
    images.unpack(stream, tmp_path)  # type: ignore[arg-type]
    assert (tmp_path / "usr/bin/g++").read_bytes() == b"binary"
    assert os.readlink(tmp_path / "etc/cc") == "/usr/bin/g++"
    assert not (tmp_path / "dev/console").exists() and (tmp_path / "etc/absolute").read_bytes() == b"abs"
    assert (tmp_path / "usr/bin/c++").stat().st_ino == (tmp_path / "usr/bin/g++-12").stat().st_ino
    assert (tmp_path / "usr/bin/g++-12").stat().st_mode & 0o7777 == 0o755        # setuid cleared


@pytest.mark.parametrize("members", [
    [(_info("../outside"), b"x")],
    [(_info("escape", tarfile.SYMTYPE, "/tmp"), b""), (_info("escape/planted"), b"x")],
    [(_info("up", tarfile.SYMTYPE, "../.."), b""), (_info("up/planted"), b"x")],
    [(_info("hard", tarfile.LNKTYPE, "../../etc/passwd"), b"")],
    [(_info("hard", tarfile.LNKTYPE, "/etc/passwd"), b"")],
])
def test_unpack_refuses_what_would_land_outside(tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    dest = tmp_path / "root"
    dest.mkdir()
    with pytest.raises(StepFailed, match="the judge image's filesystem was refused"):
        images.unpack(_tar(*members), dest)  # type: ignore[arg-type]
    assert not (tmp_path / "outside").exists() and not Path("/tmp/planted").exists()
    assert not (dest / "hard").exists()


def test_judge_image_is_for_the_sandbox_judge_only() -> None:
    base = {"problem": "cmx001", "code": "main.cpp", "judge_image": "cmx-ale-bench-judge:x"}
    assert parse(base).judge_image == "cmx-ale-bench-judge:x" and parse(base).judge == "sandbox"
    assert parse({**base, "judge_image": ""}).judge_image == ""
    with pytest.raises(UsageError, match="only the sandbox judge"):
        parse({**base, "judge": "docker"})


def _cmx(home: Path, *args: str, docker_host: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(home)}
    if docker_host is not None:
        env["DOCKER_HOST"] = docker_host
    return subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=ale-bench,public-eval",
                           "--problem=cmx001", *args, "--json"], capture_output=True, text=True, env=env,
                          timeout=900, check=False)


def _one_line_exit_2(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "--judge_image" in line]
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    json.loads(proc.stdout)   # still exactly one JSON document


def test_no_engine_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _cmx(tmp_path / "home", f"--code={SOLUTIONS / 'trivial.cpp'}", "--language=cpp20",
                "--judge_image=cmx-ale-bench-judge:any", docker_host=f"unix://{tmp_path}/absent.sock")
    _one_line_exit_2(proc, "no container engine answers at", "drop --judge_image")


def test_a_missing_image_says_how_to_build_it(docker_engine: str, tmp_path: Path) -> None:
    proc = _cmx(tmp_path / "home", f"--code={SOLUTIONS / 'trivial.cpp'}", "--language=cpp20",
                "--judge_image=cmx-ale-bench-judge:not-built-here", docker_host=docker_engine)
    _one_line_exit_2(proc, "--judge_image cmx-ale-bench-judge:not-built-here: no such image",
                     "cmx run recipe --tags=build,image,ale-bench-judge")
    assert not list((tmp_path / "home").rglob(images.MARKER))       # nothing half-written


@pytest.fixture(scope="module")
def image_root(judge_image: str, tmp_path_factory: pytest.TempPathFactory) -> images.ImageRoot:
    return images.export_root(judge_image, tmp_path_factory.mktemp("judge-image-cache"))


@pytest.mark.usefixtures("sandbox_ready")
def test_export_once_per_image_id(judge_image: str, image_root: images.ImageRoot) -> None:
    import docker

    ident = docker.from_env().images.get(judge_image).id
    assert image_root.image_id == ident and image_root.path.name == ident.removeprefix("sha256:")[:32]
    marker = image_root.path / images.MARKER
    assert json.loads(marker.read_text()) == {"image_id": ident}
    stamp = marker.stat().st_mtime_ns
    again = images.export_root(judge_image, image_root.path.parents[2])
    assert again == image_root and marker.stat().st_mtime_ns == stamp                  # reused, not re-exported
    assert [p.name for p in image_root.path.parent.iterdir() if p.name.startswith(".stage-")] == []
    assert (image_root.path / "etc/ale-bench-judge-libraries.txt").is_file()
    compiler = os.path.realpath(image_root.path / "usr/bin/g++")         # g++ -> g++-12 -> x86_64-linux-gnu-g++-12
    assert compiler.startswith(str(image_root.path) + "/usr/bin/") and compiler.endswith("g++-12")


@pytest.mark.usefixtures("sandbox_ready")
def test_boost_eigen_solution_is_accepted_on_the_image_root(image_root: images.ImageRoot, problem: Problem,
                                                            input_cache: Path, tmp_path: Path) -> None:
    runner = SandboxRunner(root_fs=str(image_root.path))
    chain = images.image_toolchain(image_root, runner, tmp_path / "probe")
    # the calls run on the image's root, not the host's: the host's bwrap is not there
    bwrap = os.path.realpath(shutil.which("bwrap") or "/usr/bin/bwrap")
    assert bwrap.startswith("/usr/") and Path(bwrap).is_file()
    (tmp_path / "look").mkdir()
    look = Call(("/usr/bin/sh", "-c", f"test -e {bwrap}; echo $?; cat /usr/include/boost/version.hpp"),
                tmp_path / "look", CallLimits(30.0, 30.0, 256 << 20, 1 << 20))
    seen = runner.run(look).stdout.decode()
    assert seen.splitlines()[0] == "1" and "BOOST_LIB_VERSION" in seen
    compiler = language("cpp20", chain)
    assert compiler.compile is not None and "-I/usr/include/eigen3" in compiler.compile
    inputs = case_inputs(runner, problem, [0, 1], input_cache)
    ev = Judge(runner, problem, compiler).evaluate(LIBRARIES_CPP, inputs, "public", False, tmp_path / "w")
    assert ev.judge_result is JudgeResult.ACCEPTED, (ev.compile_message, [c.message for c in ev.cases])
    assert ev.absolute_score > 0 and all(c.memory_bytes for c in ev.cases)          # the cgroup measured them
    hog = Judge(runner, problem, language("python", chain)).evaluate((SOLUTIONS / "mle.py").read_text(), inputs,
                                                                     "public", False, tmp_path / "m")
    assert hog.judge_result is JudgeResult.MEMORY_LIMIT_EXCEEDED, [c.message for c in hog.cases]
    rust = Judge(runner, problem, language("rust", chain)).evaluate((SOLUTIONS / "trivial.rs").read_text(), inputs,
                                                                    "public", False, tmp_path / "r")
    assert language("rust", chain).compile[0] == "/usr/bin/rustc"                       # type: ignore[index]
    assert rust.judge_result is JudgeResult.ACCEPTED, (rust.compile_message, [c.message for c in rust.cases])
    recorded = toolchain.libraries(chain)
    assert recorded["source"] == "image" and recorded["image_id"] == image_root.image_id
    assert recorded["gxx"] and recorded["gxx"].startswith("12.") and recorded["cpp23"] is True
    assert recorded["boost"] and recorded["boost"].startswith("1.74") and recorded["eigen"] == "3.4.0"
    if toolchain.atcoder_dir(toolchain.HOST_ROOT) == "/opt/ac-library":   # ALE-Bench's path: borrowed
        assert recorded["atcoder_library"] == "/opt/ac-library" and "host's" in recorded["notes"][0]
    else:
        assert recorded["atcoder_library"] is None and "not packaged" in recorded["notes"][0]


@pytest.mark.usefixtures("sandbox_ready")
def test_rust_on_the_image_root_has_the_crates_the_image_built(image_root: images.ImageRoot, problem: Problem,
                                                               input_cache: Path, tmp_path: Path) -> None:
    """The image builds AtCoder's crates that Debian packages with its own cargo: a solution
    using itertools, num and rand is ACCEPTED with the std-only solution's scores, compiled by
    the image's rustc with no host toolchain or mount; one using proconio is a compile error
    that names it."""
    runner = SandboxRunner(root_fs=str(image_root.path))
    chain = images.image_toolchain(image_root, runner, tmp_path / "probe")
    lang = language("rust", chain)
    assert lang.crates is not None and set(lang.crates.externs) == {c.replace("-", "_") for c in BOOKWORM_PACKAGED}
    assert lang.binds == {} and lang.crates.at == IMAGE_CRATES + "/deps"
    inputs = case_inputs(runner, problem, [0, 1], input_cache)
    ev = Judge(runner, problem, lang).evaluate(WITH_CRATES, inputs, "public", False, tmp_path / "crates")
    assert ev.judge_result is JudgeResult.ACCEPTED, (ev.compile_message, [c.message for c in ev.cases])
    plain = Judge(runner, problem, lang).evaluate((SOLUTIONS / "trivial.rs").read_text(), inputs, "public", False,
                                                  tmp_path / "plain")
    assert [c.absolute_score for c in ev.cases] == [c.absolute_score for c in plain.cases]
    missing = Judge(runner, problem, lang).evaluate(WITH_PROCONIO, inputs, "public", False, tmp_path / "proconio")
    assert missing.judge_result is JudgeResult.COMPILATION_ERROR
    first = missing.compile_message.splitlines()[0]
    assert first.startswith("crate proconio of AtCoder's Rust set is not available on this judge"), first


@pytest.mark.usefixtures("sandbox_ready")
def test_the_recipe_judges_on_the_image_and_records_it(judge_image: str, docker_engine: str,
                                                       tmp_path: Path) -> None:
    code = tmp_path / "main.cpp"
    code.write_text(LIBRARIES_CPP)
    home = tmp_path / "home"
    runs = [_cmx(home, f"--code={code}", "--language=cpp23", f"--judge_image={judge_image}",
                 docker_host=docker_engine) for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr[-2000:]
        doc = json.loads(proc.stdout)
        recorded = doc["ale_bench"]["toolchain"]
        assert recorded["source"] == "image" and recorded["image"] == judge_image
        assert recorded["image_id"] and recorded["image_id"].startswith("sha256:")
        assert doc["ale_bench"]["judge"] == "sandbox" and doc["metrics"]["accepted_cases"]["value"] == 5
        assert "memory" in doc["ale_bench"]["limits"]["enforced_by"]       # the sandbox's own limits
    markers = list(home.rglob(images.MARKER))
    assert len(markers) == 1, markers          # exported once for both runs, keyed by the image ID


def test_the_build_command_the_error_names_builds_the_judge_template(tmp_path: Path) -> None:
    """`cmx run recipe --tags=build,image,ale-bench-judge` (in the missing-image line) resolves to
    cmx-docker's docker.build of containers/ale-bench-judge."""
    pytest.importorskip("cmx_docker")
    assert "cmx run recipe --tags=build,image,ale-bench-judge" in images.BUILD_HINT
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "plan", "recipe", "--tags=build,image,ale-bench-judge",
                           "--json"], capture_output=True, text=True, env={**os.environ, "CMX_HOME": str(tmp_path)},
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    step = json.loads(proc.stdout)["nodes"][0]["steps"][0]
    assert step["uses"] == "docker.build" and step["rendered"]["template"] == "ale-bench-judge"
    assert (Path(__file__).resolve().parents[3] / "containers" / "ale-bench-judge" / "template.yaml").is_file()
