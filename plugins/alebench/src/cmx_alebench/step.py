"""The ``alebench.evaluate`` step: read the parameters, judge, and report."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx_alebench.docker_runner import DockerRunner
from cmx_alebench.evaluate import Request, run_request
from cmx_alebench.importer import import_package, imported_dir
from cmx_alebench.judge import CaseResult, check_workers
from cmx_alebench.judge_image import export_root, image_toolchain
from cmx_alebench.languages import NAMES, language
from cmx_alebench.problem import Problem, find_problem, load_problem, shipped_dir
from cmx_alebench.report import JudgeSetup, ProblemRun, result_part, section
from cmx_alebench.runner import Runner
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.toolchain import HOST, Toolchain
from cmx_alebench.tools import BUILT_RECORD
from cmx_core.api import Artifact, StepContext, StepOutput, UsageError

EXTENSIONS = {"python": ".py", "cpp17": ".cpp", "cpp20": ".cpp", "cpp23": ".cpp", "rust": ".rs"}
MAX_CODE_BYTES = 512 << 10


@dataclass(frozen=True)
class Params:
    """The step's ``with:`` values, checked."""

    problems: tuple[str, ...]
    problems_dirs: tuple[Path, ...]
    code: Path
    language: str
    private: bool
    lite: bool
    num_workers: int
    repeats: int
    judge: str
    judge_image: str = ""
    """The judge image whose root filesystem the sandbox judge compiles and runs in ("": the host's)."""


def _text(params: Mapping[str, Any], key: str, default: str = "") -> str:
    value = params.get(key, default)
    return "" if value is None else str(value).strip()


def parse(params: Mapping[str, Any]) -> Params:
    lite = bool(params.get("lite", False))
    problems = tuple(p for p in _text(params, "problems" if lite else "problem").replace(" ", "").split(",") if p)
    if not problems:
        raise UsageError("--problem is required (a problem id such as cmx001)" if not lite else
                         "--problems must list problem ids (comma separated) or say 'all'")
    mode = _text(params, "mode", "public")
    if mode not in ("public", "private"):
        raise UsageError(f"alebench.evaluate mode {mode!r} must be public or private")
    judge = _text(params, "judge", "sandbox")
    if judge not in ("sandbox", "docker"):
        raise UsageError(f"--judge {judge!r} must be sandbox or docker")
    name = _text(params, "language", "python")
    if name not in NAMES:
        raise UsageError(f"--language {name!r} is not supported; pick one of {', '.join(NAMES)}")
    code = _text(params, "code")
    if not code:
        raise UsageError("--code is required: the solution file (or, with lite, a folder of <problem_id>.<ext>)")
    repeats = int(params.get("repeats", 1))
    if repeats < 1:
        raise UsageError(f"--repeats {repeats} must be at least 1")
    dirs = tuple(Path(p) for p in _text(params, "problems_dir").split(",") if p)
    image = _text(params, "judge_image")
    if image and judge != "sandbox":
        raise UsageError(f"--judge_image {image}: only the sandbox judge takes an image's root filesystem; "
                         "drop --judge=docker (the docker judge runs DockerRunner(image=REF, host_usr=False))")
    return Params(problems, dirs, Path(code), name, mode == "private", lite,
                  check_workers(int(params.get("num_workers", 1))), repeats, judge, image)


def _problems(p: Params) -> list[Problem]:
    if p.problems == ("all",):
        roots = [c for d in (*p.problems_dirs, shipped_dir()) if d.is_dir() for c in sorted(d.iterdir())
                 if (c / "data.json").is_file()]
        seen: dict[str, Problem] = {}
        for root in roots:
            problem = load_problem(root)
            seen.setdefault(problem.problem_id, problem)
        return list(seen.values())
    return [find_problem(pid, list(p.problems_dirs)) for pid in p.problems]


def _code(p: Params, problem: Problem) -> str:
    path = p.code / f"{problem.problem_id}{EXTENSIONS[p.language]}" if p.code.is_dir() else p.code
    if not path.is_file():
        raise UsageError(f"--code {path}: no such file; give the solution's path")
    if path.stat().st_size > MAX_CODE_BYTES:
        raise UsageError(f"--code {path}: larger than {MAX_CODE_BYTES} bytes; submit the source only")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--code {path}: not UTF-8 text; submit a source file") from None


def _tools_built(problem: Problem, cache: Path) -> Problem:
    """A problem whose Rust tools/ crate is not built yet is imported first (built once, cached)."""
    tools = problem.root / "tools"
    if (problem.root / BUILT_RECORD).is_file() or (tools / "gen.py").is_file() or not (tools / "Cargo.toml").is_file():
        return problem
    return load_problem(import_package(problem.root, cache).dest)


class CasesJudged:
    """``cases_judged`` on the application channel (docs/telemetry.md) as each case is judged
    (from the judge's worker threads), and ``problems_judged`` after each problem."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        self._lock = threading.Lock()
        self.count = 0

    def judged(self, case: CaseResult) -> None:
        with self._lock:
            self.count += 1
            self._ctx.report("cases_judged", self.count, kind="counter")

    def problem_done(self, cases: int, problems: int) -> None:
        """The exact totals (a solution that did not compile has its cases judged at once)."""
        with self._lock:
            self.count = cases
            self._ctx.report("cases_judged", cases, kind="counter")
            self._ctx.report("problems_judged", problems, kind="counter")


def make_runner(judge: str, judge_image: str, cache: Path, scratch: Path) -> tuple[Runner, Toolchain]:
    """The judge's runner and the toolchain it compiles with: the host's, or with ``judge_image``
    the sandbox rooted in that image's root filesystem (exported into ``cache`` once; the
    toolchain's probes run in ``scratch``)."""
    if judge_image:
        root = export_root(judge_image, cache)
        runner = SandboxRunner(root_fs=str(root.path))
        return runner, image_toolchain(root, runner, scratch)
    return _host_runner(judge), HOST


def _host_runner(judge: str) -> Runner:
    if judge == "docker":
        return DockerRunner()
    return SandboxRunner()


def run_step(ctx: StepContext) -> StepOutput:
    p = parse(ctx.params)
    # after --problems_dir, before the shipped ones: what 'cmx ale-bench import' installed
    p = replace(p, problems_dirs=(*p.problems_dirs, imported_dir(ctx.cache_dir)))
    problems = [_tools_built(problem, ctx.cache_dir) for problem in _problems(p)]
    codes = {problem.problem_id: _code(p, problem) for problem in problems}
    runner, chain = make_runner(p.judge, p.judge_image, ctx.cache_dir, ctx.work_dir / "toolchain")
    lang = language(p.language, chain, ctx.cache_dir)
    runs = []
    tally = CasesJudged(ctx)
    for problem in problems:
        request = Request(problem, codes[problem.problem_id], lang, p.private, p.lite, p.num_workers, p.repeats)
        ctx.log.info("alebench: %s %s evaluation of %s with the %s judge (%s toolchain)", problem.problem_id,
                     "private" if p.private else "public", p.code, p.judge, chain.image or "host")
        runs.append(ProblemRun(problem, tuple(run_request(request, runner, ctx.cache_dir, ctx.work_dir / "judge",
                                                          on_case=tally.judged))))
        tally.problem_done(sum(len(rated.evaluation.cases) for run in runs for rated in run.rated), len(runs))
    setup = JudgeSetup(p.judge, p.language, p.private, p.lite, p.num_workers, p.repeats)
    sec = section(runs, setup, enforced_by=getattr(runner, "enforced_by", None), chain=chain)
    final = _final_results(ctx.work_dir, runs, p, codes)
    part = result_part(runs, sec, p.private, p.lite)
    first = runs[0].rated[0]
    outputs = {"overall_judge_result": first.evaluation.judge_result.value,
               "overall_absolute_score": first.evaluation.absolute_score,
               "rank": first.rank, "performance": first.performance, "final_results": str(final)}
    return StepOutput(outputs=outputs, result=part, artifacts=(Artifact(final, "final_results"),))


def _final_results(work: Path, runs: list[ProblemRun], p: Params, codes: Mapping[str, str]) -> Path:
    """ALE-Bench's ``final_results.json`` shape, one object per problem (first repeat)."""
    rows = [{"problem_id": run.problem.problem_id, "model_name": None, "code_language": p.language,
             "code": codes[run.problem.problem_id],
             "overall_absolute_score": run.rated[0].evaluation.absolute_score,
             "overall_relative_score": run.rated[0].evaluation.relative_score,
             "rank": run.rated[0].rank, "performance": run.rated[0].performance,
             "repeat_index": run.rated[0].repeat_index} for run in runs]
    path = work / "final_results.json"
    work.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return path
