"""One problem's evaluation as a user asks for it: public or private cases, ``repeats``
times, then (private) the relative rescaling, the rank and the performance (§3.5)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import CaseResult, Evaluation, Judge
from cmx_alebench.languages import Language
from cmx_alebench.problem import Problem
from cmx_alebench.relative import Rescaled, load_contestants, rescale
from cmx_alebench.runner import Runner
from cmx_alebench.standings import load_performance, load_standings, place
from cmx_alebench.verdicts import JudgeResult


@dataclass(frozen=True)
class Request:
    """What to evaluate and how."""

    problem: Problem
    code: str
    language: Language
    private: bool
    lite: bool
    num_workers: int
    repeats: int


@dataclass(frozen=True)
class Rated:
    """One repeat: the evaluation, and for a private one its rank and performance."""

    repeat_index: int
    evaluation: Evaluation
    rank: int | None
    performance: int | None
    null_reason: str | None


def run_request(request: Request, runner: Runner, cache: Path, work: Path,
                on_case: Callable[[CaseResult], None] | None = None) -> list[Rated]:
    """Every repeat of ``request``, judged through ``runner`` (``on_case``: each case as it is judged)."""
    problem = request.problem
    kind = "private" if request.private else "public"
    seeds = problem.seed_list(kind, request.lite)
    inputs = case_inputs(runner, problem, seeds, cache)
    judge = Judge(runner, problem, request.language, request.num_workers, on_case=on_case)
    allow = problem.allow_score_non_ac_private if request.private else False
    rated = []
    for index in range(request.repeats):
        evaluation = judge.evaluate(request.code, inputs, kind, allow, work / problem.problem_id / f"repeat-{index}")
        rated.append(rate(problem, evaluation, index, request.lite) if request.private
                     else Rated(index, evaluation, None, None, "a public evaluation has no rank or performance"))
    return rated


def rate(problem: Problem, evaluation: Evaluation, index: int, lite: bool) -> Rated:
    """Rank and performance of a private evaluation (relative problems rescaled first)."""
    standings = load_standings(problem.standings_path(lite))
    relative_path = problem.relative_results_path(lite)
    meta = problem.metadata
    spot = place(evaluation.absolute_score, standings)
    if meta.relative_score_type is not None and meta.relative_max_score is not None:
        if relative_path is None:
            return Rated(index, evaluation, None, None,
                         f"{problem.root}: relative_results.csv is missing, so the relative score cannot be computed")
        evaluation, scaled = _relative(problem, evaluation, relative_path)
        spot = scaled.placement(standings[-1].first)
    performance = load_performance(problem.root / "performance.csv").performance(spot.rank_for_performance)
    return Rated(index, evaluation, spot.rank, performance, None)


def _relative(problem: Problem, evaluation: Evaluation, path: Path) -> tuple[Evaluation, Rescaled]:
    """The evaluation with its relative scores, and the rescaled field it is ranked in.

    The reported overall relative score is 0 unless the verdict counts (AC, or
    ``allow_score_non_ac``; never CE or IE), as ALE-Bench's ``overall_relative_score``; the rank
    uses the sum over the accepted cases either way, as ALE-Bench's ``get_new_rank`` does.
    """
    meta = problem.metadata
    assert meta.relative_score_type is not None and meta.relative_max_score is not None
    field = load_contestants(path, len(evaluation.cases))
    ours = [c.absolute_score if c.judge_result is JudgeResult.ACCEPTED else None for c in evaluation.cases]
    scaled = rescale(meta.relative_score_type, meta.relative_max_score, ours, field)
    cases = tuple(replace(c, relative_score=r) for c, r in zip(evaluation.cases, scaled.ours, strict=True))
    counted = evaluation.judge_result is JudgeResult.ACCEPTED or evaluation.allow_score_non_ac
    total = scaled.total if counted and evaluation.judge_result not in (
        JudgeResult.COMPILATION_ERROR, JudgeResult.INTERNAL_ERROR) else 0
    return replace(evaluation, cases=cases, relative_score=total), scaled
