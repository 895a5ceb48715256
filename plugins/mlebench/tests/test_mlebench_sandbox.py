"""Agents in the real bubblewrap sandbox at MLE-bench's paths: the shipped baseline agents
produce graded submissions; the validate helper answers valid or invalid and never a score;
a hostile agent (reads the answers, opens a socket, links its submission to the answers,
then runs forever) is confined, stopped at its time limit and graded as invalid with the reason."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_mlebench.agent import AgentSettings, check_env_path, parse_agent_cmd, run_agent
from cmx_mlebench.grading import grade
from cmx_mlebench.prepare import Prepared

BASELINE = "python /mlebench/baselines/baseline.py"


def _attempt(prepared: Prepared, tmp_path: Path, command: str, **settings: object):  # type: ignore[no-untyped-def]
    agent = AgentSettings(parse_agent_cmd(command), **settings)  # type: ignore[arg-type]
    run = run_agent(agent, prepared.competition.id, prepared.competition.public_dir, tmp_path)
    why = None if run.result.ok else f"the agent ended with {run.result.verdict.value} ({run.result.reason})"
    return run, grade(prepared.competition, run.submission, checksums=prepared.checksums, why_missing=why)


@pytest.mark.usefixtures("bwrap")
@pytest.mark.parametrize("name", ["sklearn-digits", "sklearn-diabetes", "sklearn-breast-cancer"])
def test_the_baseline_agent_is_graded(built: dict[str, Prepared], tmp_path: Path, name: str) -> None:
    run, report = _attempt(built[name], tmp_path, BASELINE, seed=1, time_limit_s=300)
    assert run.result.verdict.value == "ok", run.result.text("stderr")
    assert run.result.text().strip().splitlines()[-1] == "valid"  # the agent asked validate_submission
    assert report.valid_submission and report.score is not None and report.reason is None
    assert report.above_median  # a random forest beats the median of the simple pool on all three
    assert run.result.backend == "bubblewrap" and run.result.wall_s > 0


@pytest.mark.usefixtures("bwrap")
def test_validate_submission_says_valid_or_invalid_never_a_score(built: dict[str, Prepared], tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import shutil, subprocess
        def check(path):
            return subprocess.run(["validate_submission", path], capture_output=True, text=True).stdout.strip()
        shutil.copy("/home/data/sample_submission.csv", "/home/code/ok.csv")
        open("/home/code/short.csv", "w").write("id,target\\n1,0\\n")
        open("/home/code/header.csv", "w").write("id,label\\n")
        for name in ("ok", "short", "header", "absent"):
            print(name, "=", check(f"/home/code/{name}.csv"))
    """)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "check.py").write_text(script)
    agent = AgentSettings(parse_agent_cmd("python /home/agent/check.py"), time_limit_s=120,
                          agent_dir=tmp_path / "agent")
    run = run_agent(agent, "sklearn-digits", built["sklearn-digits"].competition.public_dir, tmp_path / "w")
    lines = dict(line.split(" = ", 1) for line in run.result.text().splitlines())
    assert lines["ok"] == "valid"
    assert lines["short"].startswith("invalid: 1 rows, expected 360")
    assert lines["header"].startswith("invalid: the header must be id,target")
    assert lines["absent"].startswith("invalid: no file")
    assert all(answer == "valid" or answer.startswith("invalid: ") for answer in lines.values())


HOSTILE = """
import os, socket, sys, time
answers, port = sys.argv[1], int(sys.argv[2])
leaks = []
for path in (answers, "/home/data/../private/test.csv", "/private", os.path.dirname(answers)):
    try:
        leaks.append((path, open(path).read()[:20]))
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", port), timeout=2)
    leaks.append("socket")
except OSError:
    pass
os.makedirs("/home/submission", exist_ok=True)
os.symlink(answers, "/home/submission/submission.csv")
print("LEAKS", leaks, flush=True)
while True:
    time.sleep(0.1)
"""


@pytest.mark.usefixtures("bwrap")
def test_a_hostile_agent_is_confined_and_graded_invalid(built: dict[str, Prepared], tmp_path: Path) -> None:
    prepared = built["sklearn-digits"]
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "hostile.py").write_text(HOSTILE)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.setblocking(False)
        port = server.getsockname()[1]
        command = f"python /home/agent/hostile.py {prepared.competition.answers} {port}"
        run, report = _attempt(prepared, tmp_path / "w", command, time_limit_s=4, agent_dir=tmp_path / "agent")
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing ever connected
    assert run.result.verdict.value == "time_limit"
    assert "LEAKS []" in run.result.text()
    assert report.score is None and not report.valid_submission and not report.any_medal
    assert "symbolic link" in str(report.reason) and report.gold_threshold > 0


@pytest.mark.usefixtures("bwrap")
def test_an_agent_that_writes_nothing_is_missing_with_the_agents_verdict(built: dict[str, Prepared],
                                                                         tmp_path: Path) -> None:
    run, report = _attempt(built["sklearn-diabetes"], tmp_path, "python -c 'raise SystemExit(3)'", time_limit_s=60)
    assert run.result.verdict.value == "error" and run.result.exit_code == 3
    assert not report.submission_exists and "no submission" in str(report.reason)
    assert "the agent ended with error" in str(report.reason) and report.median_threshold > 0


def _env_at(where: Path) -> Path:
    """A real venv at ``where`` (its python the base interpreter's) that sees cmx's own
    packages through a .pth file: an agent environment at a path of the caller's choosing."""
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    (site / "cmx-env.pth").write_text("".join(f"{p}\n" for p in sys.path if p.endswith("site-packages")))
    return where


@pytest.fixture(params=["/tmp", "/home"])
def env_outside(request: pytest.FixtureRequest) -> Iterator[Path]:
    """An environment under /tmp or /home, the two directories the sandbox makes private."""
    if request.param == "/home" and not os.access("/home", os.W_OK):
        pytest.skip("/home is not writable here (not root): the environment under /home needs it")
    root = Path(tempfile.mkdtemp(prefix="cmx-env-", dir=request.param))
    try:
        yield _env_at(root / "checkout" / ".venv")
    finally:
        shutil.rmtree(root)


@pytest.mark.usefixtures("bwrap")
def test_an_agent_environment_under_tmp_or_home_is_bound_at_its_own_path(built: dict[str, Prepared],
                                                                         tmp_path: Path, env_outside: Path) -> None:
    base = Path(os.path.realpath(sys.base_prefix))
    env = (env_outside, *(p for p in (Path(sys.prefix).resolve(), base) if not str(p).startswith("/usr")))
    probe = "import sys, sklearn; print(sys.prefix)"
    run, report = _attempt(built["sklearn-diabetes"], tmp_path / "probe", f"python -c '{probe}'", agent_env=env)
    assert run.result.ok, run.result.text("stderr")
    assert run.result.text().strip() == str(env_outside)  # its own python, first on PATH, at its own path
    run, report = _attempt(built["sklearn-diabetes"], tmp_path / "w", BASELINE, seed=1, agent_env=env,
                           time_limit_s=300)
    assert run.result.ok, run.result.text("stderr")
    assert report.valid_submission and report.score is not None


@pytest.mark.parametrize(("path", "taken"), [("/home/data", "/home/data"), ("/home/agent/venv", "/home/agent"),
                                             ("/home", "/home"), ("/mlebench/env", "/mlebench"),
                                             ("/home/code", "/home/code")])
def test_an_environment_at_mlebenchs_own_paths_is_refused_naming_which(path: str, taken: str) -> None:
    with pytest.raises(UsageError, match=f"collides with MLE-bench's {taken} in the sandbox"):
        check_env_path(Path(path))


@pytest.mark.parametrize("path", ["/home/u/cmx/.venv", "/home/u/.pyenv/versions/3.11.7", "/tmp/x/.venv",
                                  "/opt/venv", "/home/datasets/env", "/usr/local"])
def test_an_environment_anywhere_else_is_accepted(path: str) -> None:
    check_env_path(Path(path))


@pytest.mark.usefixtures("bwrap")
def test_the_attempt_reports_the_agent_on_the_application_channel(built: dict[str, Prepared], tmp_path: Path,
                                                                  cmx_step_context: object) -> None:
    """cmx-core's docs/telemetry.md: agent running, its elapsed seconds, the submission's state."""
    from dataclasses import replace

    from cmx_core.testing import StepSample
    from cmx_core.testing.telemetry import AppSeries, StepMetrics
    from cmx_mlebench.steps import attempt_step

    series = AppSeries()
    make = cmx_step_context  # type: ignore[assignment]
    ctx = make(StepSample(params={"agent_cmd": BASELINE, "time_limit_s": 300},  # type: ignore[operator]
                          deps={"competition": built["sklearn-digits"].outputs()}))
    ctx = replace(ctx, metrics=StepMetrics(series, "n/attempt", tmp_path / "app_metrics.txt"))
    out = attempt_step(ctx)
    reported = {v.name: v.value for v in series.snapshot()}
    assert reported["agent_running"] == 0.0 and reported["submission_present"] == 1.0
    wall = out.result.sections["mle_bench"]["agent"]["wall_s"]  # rounded to ms in the section
    assert reported["agent_elapsed_seconds"] == pytest.approx(wall, abs=1e-3) and wall > 0
