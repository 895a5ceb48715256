"""The step types: ``mlebench.prepare`` (a cached node), ``mlebench.grade`` (one submission)
and ``mlebench.attempt`` (one agent run in the sandbox, graded)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx_core.api import Artifact, StepContext, StepOutput, UsageError
from cmx_mlebench.agent import (
    AgentSettings,
    parse_agent_cmd,
    parse_agent_dir,
    parse_agent_env,
    run_agent,
    submission_path,
)
from cmx_mlebench.container import ContainerSettings
from cmx_mlebench.grading import grade
from cmx_mlebench.live import AgentWatch
from cmx_mlebench.prepare import competition_from, prepare
from cmx_mlebench.result import grading_report, report_part, write_json

SANDBOXES = ("bubblewrap", "docker")


def prepare_step(ctx: StepContext) -> StepOutput:
    p = ctx.params
    prepared = prepare(str(p.get("competition", "")), Path(ctx.work_dir), data_dir=p.get("data_dir", ""),
                       competitions_dir=p.get("competitions_dir", ""))
    return StepOutput(outputs=prepared.outputs())


def _dep(ctx: StepContext) -> Mapping[str, Any]:
    dep = ctx.deps.get("competition")
    if dep is None:
        raise UsageError(f"{ctx.recipe}: the step needs a dep 'competition' on the mle-bench-prepare recipe")
    return dep


def grade_step(ctx: StepContext) -> StepOutput:
    competition, checksums, source = competition_from(_dep(ctx))
    submission = Path(str(ctx.params.get("submission") or ""))
    if not str(ctx.params.get("submission") or ""):
        raise UsageError("--submission is required: the submission.csv to grade")
    report = grade(competition, submission.expanduser().absolute(), checksums=checksums, leaderboard_source=source)
    path = write_json(Path(ctx.work_dir) / "grading_report.json", grading_report([report.to_dict()], 1))
    return StepOutput(outputs={"score": report.score, "any_medal": report.any_medal, "report": str(path)},
                      result=report_part(report, "grade"), artifacts=(Artifact(path, "grading_report"),))


def _number(params: Mapping[str, Any], key: str, default: float, *, integer: bool = False,
            minimum: float = 0.0) -> float:
    value = params.get(key, default)
    if value in (None, ""):
        value = default
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise UsageError(f"--{key.replace('_', '-')}={value!r}: expected a number") from None
    if number < minimum:
        raise UsageError(f"--{key.replace('_', '-')}={value!r}: must be at least {minimum:g}")
    return number


def agent_settings(params: Mapping[str, Any]) -> AgentSettings:
    sandbox = str(params.get("sandbox") or "bubblewrap")
    if sandbox not in SANDBOXES:
        raise UsageError(f"--sandbox={sandbox}: choose one of {', '.join(SANDBOXES)}")
    memory_gb = _number(params, "memory_gb", 4.0)
    cpus = int(_number(params, "cpus", 0, integer=True))
    container = ContainerSettings(shm_size=str(params.get("shm_size") or "4G"),
                                  gpus=int(_number(params, "gpus", -1, integer=True, minimum=-1))) \
        if sandbox == "docker" else None
    return AgentSettings(
        argv=parse_agent_cmd(params.get("agent_cmd")), seed=int(_number(params, "seed", 0, integer=True)),
        time_limit_s=_number(params, "time_limit_s", 600.0, minimum=0.1),
        memory_bytes=int(memory_gb * (1 << 30)) if memory_gb > 0 else None, cpus=cpus or None,
        processes=int(_number(params, "processes", 256, integer=True, minimum=1)), sandbox=sandbox,
        keep_bytes=int(_number(params, "keep_mb", 256, integer=True)) << 20,
        agent_env=parse_agent_env(params.get("agent_env")), container=container,
        agent_dir=parse_agent_dir(params.get("agent_dir")))


def attempt_step(ctx: StepContext) -> StepOutput:
    settings = agent_settings(ctx.params)
    competition, checksums, source = competition_from(_dep(ctx))
    work = Path(ctx.work_dir) / "attempt"
    work.mkdir(parents=True, exist_ok=True)
    with AgentWatch(ctx, submission_path(work)):  # live, on the application channel (docs/telemetry.md)
        run = run_agent(settings, competition.id, competition.public_dir, work)
    verdict = run.result.verdict.value
    ctx.report("agent_elapsed_seconds", run.result.wall_s)
    ctx.report("submission_present", 1 if run.submission.is_file() else 0)
    why = None if run.result.ok else f"the agent ended with {verdict} ({run.result.reason})"
    report = grade(competition, run.submission, checksums=checksums, leaderboard_source=source,
                   seed=settings.seed, why_missing=why)
    agent = {"argv": list(settings.argv), "verdict": verdict, "exit_code": run.result.exit_code,
             "signal": run.result.signal, "reason": run.result.reason, "wall_s": round(run.result.wall_s, 3),
             "cpu_s": run.result.cpu_s, "peak_memory_bytes": run.result.peak_memory_bytes,
             "sandbox": run.result.backend, "enforced": list(run.result.enforced),
             "limits": {"enforced_by": run.result.enforced_by},
             "time_limit_s": settings.time_limit_s, "memory_bytes": settings.memory_bytes, "cpus": settings.cpus,
             "keep_bytes": run.keep_bytes,
             "dropped": [{"path": item.path, "bytes": item.bytes} for item in run.result.dropped],
             "container": None if settings.container is None else
             {"shm_size": settings.container.shm_size, "gpus": settings.container.gpus,
              "not_applied": list(run.not_applied)}}
    path = write_json(Path(ctx.work_dir) / "grading_report.json", grading_report([report.to_dict()], 1))
    artifacts = [Artifact(path, "grading_report"), Artifact(work / "agent.stdout", "log"),
                 Artifact(work / "agent.stderr", "log")]
    if report.valid_submission:
        artifacts.append(Artifact(run.submission, "submission_csv"))
    outputs = {"score": report.score, "any_medal": report.any_medal, "verdict": verdict, "report": str(path)}
    return StepOutput(outputs=outputs, result=report_part(report, "run", agent=agent), artifacts=tuple(artifacts))
