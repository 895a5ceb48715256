"""A 50-case public evaluation of cmx001 judged three ways, alternately in one run: bare
(the solution and the tester as plain subprocesses, nothing confined), with the sandbox
judge and with the docker judge (a fresh container per compile, case and tester call, as
ALE-Bench does). Prints each way's wall time per evaluation (min, median, max over the
rounds) and the per-case overhead of each judge over bare: (judge - bare) / cases, from
the medians of paired rounds. Each judged case is two calls (the solution, then the tester).

    .venv/bin/python benchmarks/bench_alebench.py [--rounds 3] [--cases 50] [--solution trivial.py]

The docker judge needs an engine (DOCKER_HOST, or the default socket); without one it is
left out and says why. For the whole-process ratio of the two judges, time ``--one`` as
whole processes, the two commands alternated (A B A B, e.g. 3 pairs), and quote the medians
and the median of the pair ratios:

    /usr/bin/time -f '%U %S %e' .venv/bin/python benchmarks/bench_alebench.py --one sandbox
    /usr/bin/time -f '%U %S %e' .venv/bin/python benchmarks/bench_alebench.py --one docker
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import Problem, find_problem, shipped_solutions
from cmx_alebench.runner import Runner
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.tools import read_tester
from cmx_alebench.verdicts import JudgeResult

PY = "/usr/bin/python3"


def _lang(code_path: Path) -> str:
    return "cpp20" if code_path.suffix == ".cpp" else "python"


def bare_eval(problem: Problem, code_path: Path, inputs: Mapping[int, bytes], work: Path) -> int:
    """The same two calls per case as the judges make, as plain subprocesses; the total score."""
    total = 0
    tester = problem.root / "tools" / "tester.py"
    argv = [PY, str(code_path)]
    if _lang(code_path) == "cpp20":
        argv = [str(work / "bare.out")]
        subprocess.run(["g++", "-std=gnu++20", "-O2", "-o", argv[0], str(code_path)], check=True)
    for seed, case_input in inputs.items():
        out = subprocess.run(argv, input=case_input, capture_output=True, check=True, cwd=work)
        (work / "input.txt").write_bytes(case_input)
        (work / "output.txt").write_bytes(out.stdout)
        tested = subprocess.run([PY, str(tester), "input.txt", "output.txt"], capture_output=True, cwd=work,
                                check=False)
        score = read_tester(tested.stderr, tested.returncode).score
        if score is None:
            raise SystemExit(f"bare run of seed {seed} was not accepted: {tested.stderr[-200:]!r}")
        total += score
    return total


def judged_eval(runner: Runner, problem: Problem, code_path: Path, inputs: Mapping[int, bytes], work: Path) -> int:
    judge = Judge(runner, problem, language(_lang(code_path)), num_workers=1)
    code = code_path.read_text()
    ev = judge.evaluate(code, inputs, "public", False, work)
    if ev.judge_result is not JudgeResult.ACCEPTED:
        raise SystemExit(f"{runner.name} judge: {ev.judge_result.value}: {[c.message for c in ev.cases][:2]}")
    return ev.absolute_score


def _docker() -> tuple[Runner | None, str]:
    try:
        from cmx_alebench.docker_runner import DockerRunner

        return DockerRunner(), ""
    except Exception as exc:  # noqa: BLE001 - reported, then left out
        return None, str(exc)


def _ways(problem: Problem, code_path: Path, inputs: Mapping[int, bytes], work: Path,
          docker: Runner | None) -> dict[str, Callable[[], int]]:
    ways: dict[str, Callable[[], int]] = {
        "bare": lambda: bare_eval(problem, code_path, inputs, work),
        "sandbox": lambda: judged_eval(SandboxRunner(), problem, code_path, inputs, work / "sandbox"),
    }
    if docker is not None:
        ways["docker"] = lambda: judged_eval(docker, problem, code_path, inputs, work / "docker")
    return ways


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--solution", default="trivial.py", help="a shipped solution: a .py (python) or a .cpp (cpp20)")
    parser.add_argument("--one", choices=("bare", "sandbox", "docker"), help="one evaluation, for an external timer")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = parser.parse_args()
    problem = find_problem("cmx001", [])
    code_path = shipped_solutions() / args.solution
    with tempfile.TemporaryDirectory(prefix="bench-alebench-") as tmp:
        work = Path(tmp)
        inputs = case_inputs(SandboxRunner(), problem, list(range(args.cases)), Path(tempfile.gettempdir()) /
                             "cmx-bench-alebench-inputs")
        docker, why = (None, "not asked") if args.one in ("bare", "sandbox") else _docker()
        if args.one == "docker" and docker is None:
            raise SystemExit(f"docker judge unavailable: {why}")
        ways = _ways(problem, code_path, inputs, work, docker)
        if args.one:
            ways[args.one]()
            return
        report(ways, args.rounds, args.cases, why, args.json)


def report(ways: Mapping[str, Callable[[], int]], rounds: int, cases: int, docker_why: str, as_json: bool) -> None:
    times: dict[str, list[float]] = {name: [] for name in ways}
    scores: dict[str, set[int]] = {name: set() for name in ways}
    for way in ways.values():  # warm-up: compile caches, the docker image, page cache
        way()
    for _ in range(rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            scores[name].add(way())
            times[name].append(time.perf_counter() - start)
    bare = statistics.median(times["bare"])
    figures: dict[str, dict[str, Any]] = {name: {"min_s": min(t), "median_s": statistics.median(t), "max_s": max(t),
                      "per_case_overhead_ms": None if name == "bare" else
                      statistics.median(j - b for j, b in zip(t, times["bare"], strict=True)) / cases * 1000,
                      "scores": sorted(scores[name])} for name, t in times.items()}
    result: dict[str, Any] = {"cases": cases, "rounds": rounds, "ways": figures, "bare_median_s": bare,
              "docker": "measured" if "docker" in ways else f"left out: {docker_why}"}
    if "docker" in figures:
        result["docker_over_sandbox_median_ratio"] = figures["docker"]["median_s"] / figures["sandbox"]["median_s"]
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(f"{cases}-case public evaluation of cmx001, {rounds} rounds (alternating), wall seconds per evaluation")
    for name, fig in figures.items():
        over_ms = fig["per_case_overhead_ms"]
        over = "" if over_ms is None else f"  per-case overhead {over_ms:.1f} ms"
        print(f"  {name:8s} min {fig['min_s']:.2f}  median {fig['median_s']:.2f}  max {fig['max_s']:.2f}{over}"
              f"  score {fig['scores']}")
    if "docker" in figures:
        print(f"  docker / sandbox (medians): {result['docker_over_sandbox_median_ratio']:.1f}x")
    else:
        print(f"  docker judge: {result['docker']}")


if __name__ == "__main__":
    main()
