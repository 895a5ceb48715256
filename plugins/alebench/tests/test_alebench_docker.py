"""The docker judge: its container configuration and outcome reading checked client-side,
then real containers (a private dockerd when DOCKER_HOST names none) giving the same
verdicts and scores as the sandbox on the same cases."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cmx_alebench.docker_runner import JUDGE_IMAGE, UID, container_config, read_outcome, skeleton_tar
from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import Problem, shipped_solutions
from cmx_alebench.runner import Call, CallLimits, Ending
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.verdicts import JudgeResult

SOLUTIONS = shipped_solutions()
LIMITS = CallLimits(wall_s=3.2, cpu_s=3.1, memory_bytes=256 << 20, output_bytes=1000)


def _call(tmp_path: Path, argv: tuple[str, ...] = ("/usr/bin/python3", "/sol/main.py")) -> Call:
    (tmp_path / "work").mkdir(exist_ok=True)
    return Call(argv=argv, work_dir=tmp_path / "work", limits=LIMITS, binds={"/srv/build": "/sol"},
                env={"PYTHONDONTWRITEBYTECODE": "1"})


def test_container_config_is_alebench_shaped(tmp_path: Path) -> None:
    config = container_config(_call(tmp_path, ("/usr/bin/python3", "/sol/main.py", "$(reboot); x")),
                              tmp_path / "meta")
    assert config["image"] == JUDGE_IMAGE and config["network_mode"] == "none" and config["network_disabled"]
    assert config["nano_cpus"] == 1_000_000_000 and config["user"] == f"{UID}:{UID}"
    assert config["mem_limit"] == config["memswap_limit"] > LIMITS.memory_bytes
    assert config["read_only"] and config["cap_drop"] == ["ALL"]
    shell, flag, script, name, *argv = config["command"]
    assert (shell, flag, name) == ("/usr/bin/sh", "-c", "sh")
    assert argv == ["/usr/bin/python3", "/sol/main.py", "$(reboot); x"]   # positional: never spliced into the script
    assert "$(reboot)" not in script and '"$@"' in script
    assert script.startswith("exec /usr/bin/timeout 3.2 /usr/bin/prlimit --cpu=4 --fsize=1000")
    assert "/usr/bin/time -f" in script and "< /judge/stdin > /judge/stdout" in script
    mounts = {m["Target"]: m for m in config["mounts"]}
    assert mounts["/usr"]["ReadOnly"] and mounts["/sol"]["ReadOnly"] and mounts["/sol"]["Source"] == "/srv/build"
    assert not mounts["/work"].get("ReadOnly") and config["environment"]["PYTHONDONTWRITEBYTECODE"] == "1"


def test_skeleton_image_has_no_registry_content() -> None:
    with tarfile.open(fileobj=io.BytesIO(skeleton_tar())) as tar:
        members = {m.name: m for m in tar.getmembers()}
        passwd = tar.extractfile("etc/passwd")
        assert passwd is not None and f"nobody:x:{UID}:{UID}" in passwd.read().decode()
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert members["tmp"].mode == 0o1777 and members["usr"].isdir()


def _meta(tmp_path: Path, profile: str, stdout: bytes = b"", stderr: bytes = b"") -> Path:
    meta = tmp_path / "meta"
    meta.mkdir(exist_ok=True)
    (meta / "profile").write_text(profile)
    (meta / "stdout").write_bytes(stdout)
    (meta / "stderr").write_bytes(stderr)
    return meta


@pytest.mark.parametrize(("profile", "code", "oom", "stdout", "ending", "exit_code"), [
    ("0.05 0.03 0.01 9000 0\n", 0, False, b"5000 5000\n", Ending.EXITED, 0),
    ("Command exited with non-zero status 1\n0.05 0.03 0.01 9000 1\n", 1, False, b"", Ending.EXITED, 1),
    ("", 124, False, b"", Ending.TIME, 124),                                    # timeout killed time too
    ("Command terminated by signal 9\n0.30 0.20 0.05 300000 0\n", 137, True, b"", Ending.MEMORY, None),
    ("Command terminated by signal 24\n3.1 3.1 0.0 9000 0\n", 152, False, b"", Ending.TIME, None),
    ("Command terminated by signal 25\n0.1 0.1 0.0 9000 0\n", 153, False, b"x" * 1000, Ending.OUTPUT, None),
    ("Command exited with non-zero status 1\n0.1 0.1 0.0 9000 1\n", 1, False, b"x" * 1000, Ending.OUTPUT, 1),
    ("Command terminated by signal 11\n0.1 0.1 0.0 9000 0\n", 139, False, b"", Ending.SIGNALED, None),
])
def test_outcome_from_recorded_files(tmp_path: Path, profile: str, code: int, oom: bool, stdout: bytes,
                                     ending: Ending, exit_code: int | None) -> None:
    ran = read_outcome(_meta(tmp_path, profile, stdout), code, 0.5, oom, False, _call(tmp_path))
    assert ran.ending is ending and ran.exit_code == exit_code
    if profile.strip():
        last = profile.strip().splitlines()[-1].split()
        assert ran.wall_s == float(last[0]) and ran.cpu_s == pytest.approx(float(last[1]) + float(last[2]))
        assert ran.memory_bytes == int(last[3]) * 1024
    else:
        assert ran.wall_s == 0.5 and ran.cpu_s is None   # nothing measured: the host's wall time, CPU null


@pytest.mark.usefixtures("sandbox_ready")
@pytest.mark.parametrize(("solution", "lang"), [("trivial.py", "python"), ("trivial.cpp", "cpp20"),
                                                ("wa.py", "python"), ("re.py", "python"), ("ce.cpp", "cpp17"),
                                                ("ole.py", "python")])
def test_docker_judge_agrees_with_the_sandbox(docker_engine: str, problem: Problem, input_cache: Path,
                                              tmp_path: Path, solution: str, lang: str) -> None:
    from cmx_alebench.docker_runner import DockerRunner

    seeds = [0, 1]
    inputs = case_inputs(SandboxRunner(), problem, seeds, input_cache)
    code = (SOLUTIONS / solution).read_text()
    results = []
    for runner in (DockerRunner(), SandboxRunner()):
        judge = Judge(runner, problem, language(lang), num_workers=2)
        results.append(judge.evaluate(code, inputs, "public", False, tmp_path / runner.name))
    docker, sandbox = results
    assert docker.judge_result is sandbox.judge_result, [c.message for c in docker.cases]
    assert [(c.judge_result, c.absolute_score) for c in docker.cases] == [
        (c.judge_result, c.absolute_score) for c in sandbox.cases]
    if docker.judge_result is JudgeResult.ACCEPTED:
        assert all(c.memory_bytes for c in docker.cases)


@pytest.mark.usefixtures("sandbox_ready")
def test_recipe_with_the_docker_judge(docker_engine: str, home: Path) -> None:
    env = {**os.environ, "CMX_HOME": str(home), "DOCKER_HOST": docker_engine}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=ale-bench,public-eval",
                           "--problem=cmx001", f"--code={SOLUTIONS / 'trivial.py'}", "--judge=docker", "--json"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["ale_bench"]["judge"] == "docker" and doc["status"] == "valid"
    assert doc["ale_bench"]["problems"][0]["evaluations"][0]["overall_judge_result"] == "ACCEPTED"


def test_docker_judge_without_an_engine_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    code = ("from cmx_alebench.docker_runner import DockerRunner\n"
            "from cmx_core.errors import UsageError\n"
            "try:\n    DockerRunner()\nexcept UsageError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert "--judge docker: no container engine answers" in proc.stdout and "--judge sandbox" in proc.stdout


def test_an_oom_kill_wins_over_a_time_verdict() -> None:
    """The container's OOMKilled is read before any time verdict: a hog the cgroup killed after
    running past its wall limit is MLE (client-side: the ending of the engine's facts)."""
    from cmx_alebench.docker_runner import _ending
    from cmx_alebench.runner import Ending

    assert _ending(137, None, oom=True, timed_out=True, full=False, exit_code=137)[0] is Ending.MEMORY
    assert _ending(137, 9, oom=True, timed_out=False, full=False, exit_code=137)[0] is Ending.MEMORY
    assert _ending(124, None, oom=False, timed_out=False, full=False, exit_code=124)[0] is Ending.TIME
    assert _ending(137, None, oom=False, timed_out=True, full=False, exit_code=137)[0] is Ending.TIME
