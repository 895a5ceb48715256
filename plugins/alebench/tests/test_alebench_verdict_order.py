"""A case the memory limit killed is MEMORY_LIMIT_EXCEEDED however long it took to get there
(a loaded machine stretches the wall time past the TL before the kill), and a case the output
cap killed is OUTPUT_LIMIT_EXCEEDED the same way; a run that merely
took too long is still TIME_LIMIT_EXCEEDED, and a peak above the limit after a slow run too."""

from __future__ import annotations

from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import Problem
from cmx_alebench.runner import Ending, Ran
from cmx_alebench.verdicts import JudgeResult


def _ran(ending: Ending, wall_s: float, memory: int | None, code: int | None = None) -> Ran:
    return Ran(ending=ending, exit_code=code, wall_s=wall_s, cpu_s=0.1, memory_bytes=memory, stdout=b"",
               stderr=b"", reason="why")


def test_the_memory_kill_decides_before_the_time(problem: Problem) -> None:
    judge = Judge(runner=None, problem=problem, language=language("python"))  # type: ignore[arg-type]
    tl, ml = problem.constraints.time_limit_s, problem.constraints.memory_limit_bytes
    slow_kill = judge._limit_verdict(0, _ran(Ending.MEMORY, tl + 1.0, ml + 1))
    assert slow_kill is not None and slow_kill.judge_result is JudgeResult.MEMORY_LIMIT_EXCEEDED
    slow = judge._limit_verdict(0, _ran(Ending.EXITED, tl + 1.0, ml + 1, code=0))
    assert slow is not None and slow.judge_result is JudgeResult.TIME_LIMIT_EXCEEDED
    big = judge._limit_verdict(0, _ran(Ending.EXITED, tl / 2, ml + 1, code=0))
    assert big is not None and big.judge_result is JudgeResult.MEMORY_LIMIT_EXCEEDED
    assert judge._limit_verdict(0, _ran(Ending.EXITED, tl / 2, ml - 1, code=0)) is None


def test_the_output_kill_decides_before_the_time(problem: Problem) -> None:
    judge = Judge(runner=None, problem=problem, language=language("python"))  # type: ignore[arg-type]
    tl, ml = problem.constraints.time_limit_s, problem.constraints.memory_limit_bytes
    slow_kill = judge._limit_verdict(0, _ran(Ending.OUTPUT, tl + 0.2, ml // 2))
    assert slow_kill is not None and slow_kill.judge_result is JudgeResult.OUTPUT_LIMIT_EXCEEDED
    quick_kill = judge._limit_verdict(0, _ran(Ending.OUTPUT, tl / 2, ml // 2))
    assert quick_kill is not None and quick_kill.judge_result is JudgeResult.OUTPUT_LIMIT_EXCEEDED
    timed_out = judge._limit_verdict(0, _ran(Ending.TIME, tl + 0.2, ml // 2))
    assert timed_out is not None and timed_out.judge_result is JudgeResult.TIME_LIMIT_EXCEEDED
