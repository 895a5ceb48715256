"""From rated evaluations to the ``ale_bench`` result section and the run's typed metrics."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cmx_alebench import __version__, toolchain
from cmx_alebench.evaluate import Rated
from cmx_alebench.judge import CaseResult, Evaluation
from cmx_alebench.problem import Problem
from cmx_alebench.verdicts import JudgeResult
from cmx_core.api import Metric, ResultPart

JUDGE_VERSION = f"cmx-alebench-{__version__}"


@dataclass(frozen=True)
class ProblemRun:
    """One problem's repeats as evaluated."""

    problem: Problem
    rated: tuple[Rated, ...]


def _case(case: CaseResult) -> dict[str, Any]:
    return {"seed": case.seed, "judge_result": case.judge_result.value, "absolute_score": case.absolute_score,
            "relative_score": case.relative_score, "execution_time_s": round(case.execution_time_s, 6),
            "memory_bytes": case.memory_bytes, "message": case.message[:500], "scratch_bytes": case.scratch_bytes}


def _evaluation(rated: Rated) -> dict[str, Any]:
    ev: Evaluation = rated.evaluation
    return {"repeat_index": rated.repeat_index, "kind": ev.kind, "overall_judge_result": ev.judge_result.value,
            "overall_absolute_score": ev.absolute_score, "overall_relative_score": ev.relative_score,
            "allow_score_non_ac": ev.allow_score_non_ac, "n_cases": len(ev.cases), "rank": rated.rank,
            "performance": rated.performance, "null_reason": rated.null_reason,
            "compile_message": ev.compile_message[:2000], "cases": [_case(c) for c in ev.cases]}


def _entry(run: ProblemRun) -> dict[str, Any]:
    meta, first = run.problem.metadata, run.rated[0]
    rtype = meta.relative_score_type
    return {"problem_id": meta.problem_id, "title": meta.title, "score_type": meta.score_type,
            "relative_score_type": rtype.value if rtype else None,
            "time_limit_s": run.problem.constraints.time_limit_s,
            "memory_limit_bytes": run.problem.constraints.memory_limit_bytes,
            "standings_source": meta.standings_source, "rank": first.rank, "performance": first.performance,
            "repeat_index": first.repeat_index, "evaluations": [_evaluation(r) for r in run.rated]}


@dataclass(frozen=True)
class JudgeSetup:
    """How the problems were judged, as the section reports it."""

    judge: str
    language: str
    private: bool
    lite: bool
    num_workers: int
    repeats: int


def section(runs: Sequence[ProblemRun], setup: JudgeSetup, *, enforced_by: dict[str, str] | None = None,
            chain: toolchain.Toolchain = toolchain.HOST) -> dict[str, Any]:
    cases = sum(len(r.evaluation.cases) for run in runs for r in run.rated)
    seconds = sum(c.execution_time_s for run in runs for r in run.rated for c in r.evaluation.cases)
    calls = len(runs) * setup.repeats
    return {"judge": setup.judge, "judge_version": JUDGE_VERSION, "code_language": setup.language, "lite": setup.lite,
            "mode": "private_eval" if setup.private else "public_eval", "num_workers": setup.num_workers,
            "repeats": setup.repeats, "standings_source": _source(runs), "problems": [_entry(run) for run in runs],
            "toolchain": toolchain.libraries(chain),
            "limits": {"enforced_by": dict(enforced_by or {})},
            "resource_usage": {"num_case_eval": cases, "num_call_public_eval": 0 if setup.private else calls,
                               "num_call_private_eval": calls if setup.private else 0,
                               "execution_time_case_eval": round(seconds, 6)}}


def _source(runs: Sequence[ProblemRun]) -> str:
    return "synthetic" if any(r.problem.metadata.standings_source == "synthetic" for r in runs) else "ale-bench"


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present and len(present) == len(values) else None


def metrics(runs: Sequence[ProblemRun], private: bool) -> tuple[dict[str, Metric], str]:
    """The typed metrics and the primary one's name (first repeat of each problem)."""
    firsts = [run.rated[0] for run in runs]
    if len(runs) == 1:
        run, first = runs[0], firsts[0]
        out = {"score": Metric(first.evaluation.absolute_score, "points", run.problem.metadata.maximize),
               "rank": Metric(first.rank, "rank", False), "performance": Metric(first.performance, "rating", True),
               "accepted_cases": Metric(_accepted(first.evaluation), "count", True),
               "max_execution_time_s": Metric(_max_time(first.evaluation), "s", False)}
        if len(run.rated) > 1:
            out["score_mean"] = Metric(statistics.fmean(r.evaluation.absolute_score for r in run.rated), "points",
                                       run.problem.metadata.maximize)
        return out, "performance" if private else "score"
    out = {"performance_mean": Metric(_mean([f.performance for f in firsts]), "rating", True),
           "rank_mean": Metric(_mean([f.rank for f in firsts]), "rank", False),
           "accepted_problems": Metric(sum(f.evaluation.judge_result is JudgeResult.ACCEPTED for f in firsts),
                                       "count", True)}
    return out, "performance_mean" if private else "accepted_problems"


def _accepted(ev: Evaluation) -> int:
    return sum(c.judge_result is JudgeResult.ACCEPTED for c in ev.cases)


def _max_time(ev: Evaluation) -> float | None:
    ran = [c.execution_time_s for c in ev.cases if c.judge_result is not JudgeResult.COMPILATION_ERROR]
    return round(max(ran), 6) if ran else None


def result_part(runs: Sequence[ProblemRun], sec: dict[str, Any], private: bool, lite: bool) -> ResultPart:
    values, primary = metrics(runs, private)
    reasons = tuple(f"{run.problem.problem_id} repeat {r.repeat_index}: {r.evaluation.judge_result.value}"
                    for run in runs for r in run.rated if r.evaluation.judge_result is not JudgeResult.ACCEPTED)
    notes = [r.null_reason for run in runs for r in run.rated[:1] if r.null_reason]
    if sec["standings_source"] == "synthetic":
        notes.append("standings and performance tables are synthetic (standings_source: synthetic); "
                     "rank and performance are not AtCoder's")
    task = runs[0].problem.problem_id if len(runs) == 1 else "lite"
    return ResultPart(
        status="invalid" if reasons else "valid",
        benchmark={"suite": "ale-bench", "suite_version": JUDGE_VERSION, "task": task,
                   "mode": sec["mode"], "variant": "lite" if lite else "full",
                   "division": "unofficial" if sec["standings_source"] == "synthetic" else "open",
                   "primary_metric": primary},
        metrics=values, invalid_reasons=reasons, sections={"ale_bench": sec}, notes="; ".join(dict.fromkeys(notes)))
