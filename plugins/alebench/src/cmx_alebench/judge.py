"""The judge (§3.3-3.4): compile once, run every case and its tester confined, give verdicts.

Every compile, case and tester call goes through a :class:`~cmx_alebench.runner.Runner`
(the sandbox, or one container per call). A case runs under ALE-Bench's bounds: a wall
limit of ceil(TL + 0.1) + 0.2 s and a CPU limit of ceil(TL + 0.1) + 0.1 s, the problem's
memory limit; its execution time is max(CPU, wall) and more than TL is TLE.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from cmx_alebench.languages import Language
from cmx_alebench.problem import Problem
from cmx_alebench.runner import Call, CallLimits, Ending, Ran, Runner, lane
from cmx_alebench.scoring import overall_absolute
from cmx_alebench.tools import Tools, read_reactive_tester, read_tester
from cmx_alebench.verdicts import JudgeResult, overall
from cmx_core.errors import UsageError

COMPILE_TIMEOUT_S = 60.0
COMPILE_LIMITS = CallLimits(wall_s=COMPILE_TIMEOUT_S, cpu_s=COMPILE_TIMEOUT_S, memory_bytes=2 << 30,
                            output_bytes=16 << 20)
OUTPUT_LIMIT_BYTES = 16 << 20
"""What a case may print (stdout plus stderr) before it is OUTPUT_LIMIT_EXCEEDED."""
CASE_WORK_BYTES = 256 << 20
"""The total size of what a case's solution may write into its work dir (a tmpfs of this size
under the sandbox; full, the case is OUTPUT_LIMIT_EXCEEDED). A solution reads stdin and answers
on stdout, so its files are scratch; the bytes are memory charged to the case's memory limit,
so the bound sits well below the usual 1 GiB limit, and a filler is judged by the disk bound,
not killed for memory."""


@dataclass(frozen=True)
class CaseResult:
    """One case: its seed, verdict, scores, execution time (max of CPU and wall) and peak memory."""

    seed: int
    judge_result: JudgeResult
    absolute_score: int
    execution_time_s: float
    memory_bytes: int | None
    message: str
    relative_score: int | None = None
    scratch_bytes: int = 0
    """What the solution left in its work dir: scratch, removed once the case is judged (#54)."""


@dataclass(frozen=True)
class Evaluation:
    """A public or private evaluation: the cases and the overall verdict and score."""

    kind: str
    judge_result: JudgeResult
    absolute_score: int
    cases: tuple[CaseResult, ...]
    allow_score_non_ac: bool
    compile_message: str
    relative_score: int | None = None


def case_limits(problem: Problem, output_bytes: int = OUTPUT_LIMIT_BYTES) -> CallLimits:
    tl = problem.constraints.time_limit_s
    return CallLimits(wall_s=math.ceil(tl + 0.1) + 0.2, cpu_s=math.ceil(tl + 0.1) + 0.1,
                      memory_bytes=problem.constraints.memory_limit_bytes, output_bytes=output_bytes,
                      work_bytes=min(CASE_WORK_BYTES, problem.constraints.memory_limit_bytes // 2))


def check_workers(num_workers: int) -> int:
    cores = os.cpu_count() or 1
    if not 1 <= num_workers <= cores:
        raise UsageError(f"--num_workers {num_workers} must be between 1 and this machine's {cores} cores")
    return num_workers


class Judge:
    """Judges one code in one language on one problem through ``runner``."""

    def __init__(self, runner: Runner, problem: Problem, language: Language, num_workers: int = 1,
                 output_bytes: int = OUTPUT_LIMIT_BYTES, on_case: Callable[[CaseResult], None] | None = None) -> None:
        self.runner = runner
        self.on_case = on_case
        """Called with each case as it is judged, from the worker's thread (live progress)."""
        self.problem = problem
        self.language = language
        self.num_workers = check_workers(num_workers)
        self.tools = Tools.of(problem.root)
        self.limits = case_limits(problem, output_bytes)

    def compile(self, code: str, build_dir: Path) -> tuple[bool, str]:
        """Build ``code`` in ``build_dir``; (ok, message). The compile is bounded by 60 s."""
        build_dir.mkdir(parents=True, exist_ok=True)
        (build_dir / self.language.source).write_text(code, encoding="utf-8")
        if self.language.compile is None:
            return True, ""
        ran = self.runner.run(Call(argv=self.language.compile, work_dir=build_dir, limits=COMPILE_LIMITS,
                                   binds=self.language.binds, env=self.language.env))
        text = (ran.stdout + ran.stderr).decode("utf-8", errors="replace")[-4000:]
        if ran.ending is Ending.TIME:
            return False, f"compilation did not finish within {COMPILE_TIMEOUT_S:g} s"
        ok = ran.ending is Ending.EXITED and ran.exit_code == 0
        return ok, text if ok else self.language.compile_message(text)

    def run_case(self, build_dir: Path, seed: int, case_input: bytes, case_dir: Path,
                 runner: Runner | None = None) -> CaseResult:
        """Run one case and, if it ran within its limits, its tester (through ``runner``, a
        worker's lane, or the judge's runner)."""
        run_dir, test_dir = case_dir / "run", case_dir / "test"
        run_dir.mkdir(parents=True, exist_ok=True)
        test_dir.mkdir(parents=True, exist_ok=True)
        judged = self._judge_case(build_dir, seed, case_input, run_dir, test_dir, runner or self.runner)
        return replace(judged, scratch_bytes=clear_scratch(run_dir))

    def _judge_case(self, build_dir: Path, seed: int, case_input: bytes, run_dir: Path, test_dir: Path,
                    runner: Runner) -> CaseResult:
        if self.problem.metadata.problem_type == "reactive":
            return self._reactive_case(build_dir, seed, case_input, run_dir, runner)
        ran = runner.run(Call(argv=self.language.run, work_dir=run_dir, limits=self.limits,
                                   binds={**self.language.binds, str(build_dir): "/sol"}, env=self.language.env,
                                   stdin=case_input))
        early = self._limit_verdict(seed, ran)
        if early is not None:
            return early
        (test_dir / "input.txt").write_bytes(case_input)
        (test_dir / "output.txt").write_bytes(ran.stdout)
        tested = runner.run(self.tools.tester_call(test_dir))
        time_s, memory = ran.execution_time_s, ran.memory_bytes
        if tested.ending is not Ending.EXITED:      # the tester broke its own limits or could not run
            return CaseResult(seed, JudgeResult.INTERNAL_ERROR, 0, time_s, memory, f"tester: {tested.reason}")
        verdict = read_tester(tested.stderr, tested.exit_code)
        if verdict.score is None:
            return CaseResult(seed, JudgeResult.WRONG_ANSWER, 0, time_s, memory, verdict.wrong_answer or "")
        return CaseResult(seed, JudgeResult.ACCEPTED, verdict.score, time_s, memory, "")

    def _reactive_case(self, build_dir: Path, seed: int, case_input: bytes, run_dir: Path,
                       runner: Runner) -> CaseResult:
        """A reactive case, as ALE-Bench judges one: the tester gets the input on stdin and runs
        the solution itself (``tester SOLUTION...``); the call carries the case's limits, and the
        tester's exit and score line give the verdict (a tester that exits non-zero or prints
        nothing is RUNTIME_ERROR, as in ALE-Bench)."""
        call = self.tools.reactive_call(self.language.run, run_dir, self.limits,
                                        {**self.language.binds, str(build_dir): "/sol"}, dict(self.language.env),
                                        case_input)
        ran = runner.run(call)
        early = self._limit_verdict(seed, ran, reactive=True)
        if early is not None:
            return early
        verdict = read_reactive_tester(ran.stderr, ran.exit_code)
        if verdict.runtime_error is not None:
            return CaseResult(seed, JudgeResult.RUNTIME_ERROR, 0, ran.execution_time_s, ran.memory_bytes,
                              verdict.runtime_error)
        if verdict.score is None:
            return CaseResult(seed, JudgeResult.WRONG_ANSWER, 0, ran.execution_time_s, ran.memory_bytes,
                              verdict.wrong_answer or "")
        return CaseResult(seed, JudgeResult.ACCEPTED, verdict.score, ran.execution_time_s, ran.memory_bytes, "")

    def _limit_verdict(self, seed: int, ran: Ran, reactive: bool = False) -> CaseResult | None:
        """The verdict of a run that broke a limit or failed, else None (the tester decides)."""
        tl, ml = self.problem.constraints.time_limit_s, self.problem.constraints.memory_limit_bytes
        time_s, memory = ran.execution_time_s, ran.memory_bytes

        def case(result: JudgeResult, message: str) -> CaseResult:
            return CaseResult(seed, result, 0, time_s, memory, message)

        if ran.ending is Ending.FAILED:
            return case(JudgeResult.INTERNAL_ERROR, ran.reason)
        # a kill by the memory limit before time: a program the memory cgroup (its oom_kill count,
        # which the sandbox reads into the MEMORY ending) or the RSS watchdog killed is MLE even
        # when, slowed by reclaim on a loaded machine, it also ran past the time limit
        if ran.ending is Ending.MEMORY:
            return case(JudgeResult.MEMORY_LIMIT_EXCEEDED, f"memory limit of {ml} bytes exceeded ({ran.reason})")
        # likewise a kill by the output cap: the program stopped because of what it printed (a
        # loaded machine slows the writes that reach the cap past the TL; seen: 2.2 s of 2 s)
        if ran.ending is Ending.OUTPUT:
            return case(JudgeResult.OUTPUT_LIMIT_EXCEEDED, ran.reason)
        if ran.ending is Ending.PROCESS:  # ALE-Bench has no process verdict: a failed fork is its RE
            return case(JudgeResult.RUNTIME_ERROR, f"process limit: {ran.reason}")
        if ran.ending is Ending.TIME or time_s > tl:
            return case(JudgeResult.TIME_LIMIT_EXCEEDED, f"execution time {time_s:.3f} s > {tl:g} s ({ran.reason})")
        if memory is not None and memory > ml:  # a measured peak above the limit, in time
            return case(JudgeResult.MEMORY_LIMIT_EXCEEDED, f"memory limit of {ml} bytes exceeded ({ran.reason})")
        if reactive:       # the tester's exit code is the tester protocol's, read by the caller
            return None
        if ran.ending is Ending.SIGNALED or ran.exit_code != 0:
            tail = ran.stderr.decode("utf-8", errors="replace").strip()[-300:]
            return case(JudgeResult.RUNTIME_ERROR, f"{ran.reason}: {tail}" if tail else ran.reason)
        return None

    def evaluate(self, code: str, inputs: Mapping[int, bytes], kind: str, allow_non_ac: bool,
                 work: Path) -> Evaluation:
        """Compile ``code``, then judge every seed of ``inputs`` with ``num_workers`` in parallel."""
        if work.exists():
            shutil.rmtree(work)
        build = work / "build"
        ok, message = self.compile(code, build)
        seeds = list(inputs)
        if not ok:
            cases = tuple(CaseResult(s, JudgeResult.COMPILATION_ERROR, 0, 0.0, None, "compilation failed")
                          for s in seeds)
            return Evaluation(kind, JudgeResult.COMPILATION_ERROR, 0, cases, allow_non_ac, message)
        workers = min(self.num_workers, len(seeds)) or 1
        shares = [seeds[i::workers] for i in range(workers)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(self._worker, build, share, inputs, work / "cases" / f"w{i}")
                       for i, share in enumerate(shares)]
            done = {case.seed: case for f in futures for case in f.result()}
        return summarize(kind, tuple(done[s] for s in seeds), allow_non_ac, message)

    def _worker(self, build: Path, seeds: Sequence[int], inputs: Mapping[int, bytes], root: Path) -> list[CaseResult]:
        """One worker's share of the cases, in one lane of the runner (one sandbox for all of them)."""
        root.mkdir(parents=True, exist_ok=True)
        binds = {**self.language.binds, str(build): "/sol", **self.tools.tester_call(root).binds}
        judged = []
        with lane(self.runner, root, binds) as runner:
            for seed in seeds:
                judged.append(self.run_case(build, seed, inputs[seed], root / str(seed), runner))
                if self.on_case is not None:
                    self.on_case(judged[-1])
        return judged


def clear_scratch(folder: Path) -> int:
    """Empty ``folder`` (a case's work dir: the solution reads stdin and answers on stdout, so
    what it wrote there is scratch); the bytes its regular files held. Links are not followed.
    Without this every case's scratch, up to the case's work dir bound, stayed in the run
    directory, where the host scans what a run keeps: a filler over 50 cases left gigabytes."""
    held = 0
    for parent, dirs, files in os.walk(folder):  # top-down: a folder is opened up before it is listed
        for name in dirs:
            if not os.path.islink(os.path.join(parent, name)):  # a folder the program made unreadable
                os.chmod(os.path.join(parent, name), 0o700)
        for name in files:
            info = os.lstat(os.path.join(parent, name))
            held += info.st_size if stat.S_ISREG(info.st_mode) else 0
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return held


def summarize(kind: str, cases: Sequence[CaseResult], allow_non_ac: bool, compile_message: str = "") -> Evaluation:
    verdict = overall(c.judge_result for c in cases)
    score = overall_absolute(verdict, [(c.judge_result, c.absolute_score) for c in cases], allow_non_ac)
    return Evaluation(kind, verdict, score, tuple(cases), allow_non_ac, compile_message)
