"""The judge on the real bubblewrap sandbox: every verdict from its test solution, the
reference solutions' scores reproducible (exact for the trivial one, a range for the
time-aware greedy one), each language, parallel workers."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest

from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import CASE_WORK_BYTES, Evaluation, Judge, case_limits
from cmx_alebench.languages import language, rust_sysroot
from cmx_alebench.problem import Problem, shipped_solutions
from cmx_alebench.sandbox_runner import SandboxRunner, SessionLane
from cmx_alebench.verdicts import JudgeResult

SOLUTIONS = shipped_solutions()

pytestmark = pytest.mark.usefixtures("sandbox_ready")


def _judge(problem: Problem, solution: str, lang: str, seeds: list[int], cache: Path, work: Path,
           workers: int = 1, sessions: bool = True) -> Evaluation:
    runner = SandboxRunner(sessions=sessions)
    inputs = case_inputs(runner, problem, seeds, cache)
    judge = Judge(runner, problem, language(lang), num_workers=workers)
    return judge.evaluate((SOLUTIONS / solution).read_text(), inputs, "public", False, work)


def _centre_score(case_input: bytes) -> int:
    """Score of depots all at (5000, 5000), computed here from the statement's formula."""
    rows = [list(map(int, line.split())) for line in case_input.decode().splitlines()[1:]]
    weight = sum(d for _, _, d in rows)
    cost = sum(d * math.hypot(x - 5000, y - 5000) for x, y, d in rows)
    return math.floor(1e6 * weight / (weight + cost / 100) + 0.5)


@pytest.mark.parametrize(("solution", "lang", "verdict"), [
    ("ce.cpp", "cpp17", JudgeResult.COMPILATION_ERROR),
    ("re.py", "python", JudgeResult.RUNTIME_ERROR),
    ("tle.py", "python", JudgeResult.TIME_LIMIT_EXCEEDED),
    ("mle.py", "python", JudgeResult.MEMORY_LIMIT_EXCEEDED),
    ("wa.py", "python", JudgeResult.WRONG_ANSWER),
    ("ole.py", "python", JudgeResult.OUTPUT_LIMIT_EXCEEDED),
    ("fork.py", "python", JudgeResult.RUNTIME_ERROR),  # a refused fork, then a clean-up and an answer
    ("disk.py", "python", JudgeResult.OUTPUT_LIMIT_EXCEEDED),  # a full work dir, then an answer
])
@pytest.mark.parametrize("sessions", [True, False], ids=["session", "sandbox-per-call"])
def test_each_verdict_from_its_solution(problem: Problem, input_cache: Path, tmp_path: Path, solution: str,
                                        lang: str, verdict: JudgeResult, sessions: bool) -> None:
    if solution == "fork.py" and os.geteuid() != 0:
        pytest.skip("a refused fork is known from the pids cgroup's own count, which needs root here "
                    "(without it the process limit is RLIMIT_NPROC, which records nothing)")
    ev = _judge(problem, solution, lang, [0], input_cache, tmp_path / "w",  # one case: a TLE costs TL + ~1 s
                sessions=sessions)
    assert ev.judge_result is verdict, ev.cases[0].message
    assert ev.cases[0].judge_result is verdict and ev.absolute_score == 0
    if verdict is JudgeResult.COMPILATION_ERROR:
        assert "undeclared_name" in ev.compile_message
    if verdict is JudgeResult.TIME_LIMIT_EXCEEDED:
        assert ev.cases[0].execution_time_s > problem.constraints.time_limit_s
    if verdict is JudgeResult.MEMORY_LIMIT_EXCEEDED:
        assert ev.cases[0].memory_bytes is not None
    if verdict is JudgeResult.WRONG_ANSWER:
        assert ev.cases[0].message.startswith("wrong answer:")
    if solution == "fork.py":
        assert ev.cases[0].message.startswith("process limit: "), ev.cases[0].message
    if solution == "disk.py":  # stopped at the case's bound: what it left on the host is within it
        bound = case_limits(problem).work_bytes
        assert bound == min(CASE_WORK_BYTES, problem.constraints.memory_limit_bytes // 2)
        assert f"{bound} byte total-size bound was reached" in ev.cases[0].message, ev.cases[0].message
        left = [path for path in (tmp_path / "w").rglob("*") if path.name.startswith(("fill", "empty"))]
        assert left == [] and 0 < ev.cases[0].scratch_bytes <= bound  # scratch: counted, removed


def test_a_python_syntax_error_is_a_compilation_error(problem: Problem, input_cache: Path, tmp_path: Path) -> None:
    runner = SandboxRunner()
    judge = Judge(runner, problem, language("python"))
    ev = judge.evaluate("def broken(:\n", case_inputs(runner, problem, [0], input_cache), "public", False, tmp_path)
    assert ev.judge_result is JudgeResult.COMPILATION_ERROR and "SyntaxError" in ev.compile_message


def test_trivial_scores_exactly_and_reproducibly(problem: Problem, input_cache: Path, tmp_path: Path) -> None:
    seeds = list(problem.seed_list("public", False))
    inputs = case_inputs(SandboxRunner(), problem, seeds, input_cache)
    expected = [_centre_score(inputs[s]) for s in seeds]
    first = _judge(problem, "trivial.py", "python", seeds, input_cache, tmp_path / "a", workers=2)
    second = _judge(problem, "trivial.py", "python", seeds, input_cache, tmp_path / "b")
    assert first.judge_result is JudgeResult.ACCEPTED
    assert [c.absolute_score for c in first.cases] == expected == [c.absolute_score for c in second.cases]
    assert first.absolute_score == second.absolute_score == sum(expected)
    assert all(c.execution_time_s > 0 and c.memory_bytes for c in first.cases)


@pytest.mark.parametrize("lang", ["cpp17", "cpp20", "rust"])
def test_compiled_languages_agree_with_python(problem: Problem, input_cache: Path, tmp_path: Path,
                                              lang: str) -> None:
    if lang == "rust" and rust_sysroot() is None:
        pytest.skip("rustc is not on PATH: Rust is judged only where a toolchain is present")
    if lang.startswith("cpp") and shutil.which("g++") is None:
        pytest.skip("g++ is not installed (apt-get install g++)")
    seeds = [0, 1]
    inputs = case_inputs(SandboxRunner(), problem, seeds, input_cache)
    source = "trivial.rs" if lang == "rust" else "trivial.cpp"
    ev = _judge(problem, source, lang, seeds, input_cache, tmp_path / "w")
    assert ev.judge_result is JudgeResult.ACCEPTED, ev.compile_message
    assert [c.absolute_score for c in ev.cases] == [_centre_score(inputs[s]) for s in seeds]


def test_greedy_is_time_aware_and_in_range(problem: Problem, input_cache: Path, tmp_path: Path) -> None:
    seeds = [0, 1]
    inputs = case_inputs(SandboxRunner(), problem, seeds, input_cache)
    runs = [_judge(problem, "greedy.py", "python", seeds, input_cache, tmp_path / str(i)) for i in range(2)]
    for ev in runs:
        assert ev.judge_result is JudgeResult.ACCEPTED, [c.message for c in ev.cases]
        for case in ev.cases:
            floor = _centre_score(inputs[case.seed])
            assert 3 * floor < case.absolute_score <= 1_000_000   # far better than the trivial placement
            assert 0.8 <= case.execution_time_s <= problem.constraints.time_limit_s  # it spends its 0.8 s budget


def test_a_worker_judges_its_cases_in_one_sandbox_session(problem: Problem, input_cache: Path,
                                                          tmp_path: Path) -> None:
    """As root the sandbox judge keeps one session per worker (the escape corpus runs through
    sessions too, in cmx-core's tests); its verdicts and scores are those of a sandbox per call."""
    runner = SandboxRunner()
    if not runner.sessions:
        pytest.skip("sessions need root and cgroup v1 here")
    with runner.lane(tmp_path, {}) as lane:
        assert isinstance(lane, SessionLane)
    seeds = [0, 1, 2]
    one = _judge(problem, "trivial.py", "python", seeds, input_cache, tmp_path / "a", workers=2)
    per_call = _judge(problem, "trivial.py", "python", seeds, input_cache, tmp_path / "b", sessions=False)
    assert one.judge_result is per_call.judge_result is JudgeResult.ACCEPTED
    assert [(c.seed, c.absolute_score) for c in one.cases] == [(c.seed, c.absolute_score) for c in per_call.cases]


@pytest.mark.parametrize(("tester_tail", "verdict", "message"), [
    # a score, then exit 1: ALE-Bench's WRONG_ANSWER, not an accepted case
    ('print("Score = 900", file=sys.stderr)\nsys.exit(1)\n', JudgeResult.WRONG_ANSWER, "the tester exited 1"),
    # exit 0 and no score line: WRONG_ANSWER too, not an internal error
    ('print("all fine", file=sys.stderr)\n', JudgeResult.WRONG_ANSWER, "no 'Score = N' line"),
    # a prefix match of the score line: text may follow it on its line
    ('print("debug", file=sys.stderr)\nprint("Score = 77 (debug)", file=sys.stderr)\n', JudgeResult.ACCEPTED, ""),
    # ALE-Bench's WRONG_ANSWER cases: a line after the score line, a 'wrong answer: ' line beside a
    # score and an exit 0, a negative score
    ('print("Score = 77", file=sys.stderr)\nprint("done", file=sys.stderr)\n', JudgeResult.WRONG_ANSWER,
     "a line after its 'Score = N' line"),
    ('print("wrong answer: out of range", file=sys.stderr)\nprint("Score = 77", file=sys.stderr)\n',
     JudgeResult.WRONG_ANSWER, "wrong answer: out of range"),
    ('print("Score = -5", file=sys.stderr)\n', JudgeResult.WRONG_ANSWER, "no 'Score = N' line: Score = -5"),
])
def test_tester_exit_and_score_line_decide_the_verdict(problem: Problem, input_cache: Path, tmp_path: Path,
                                                       tester_tail: str, verdict: JudgeResult, message: str) -> None:
    """A copy of cmx001 whose tester is replaced, judged on the real sandbox with the trivial solution."""
    root = tmp_path / "p"
    shutil.copytree(problem.root, root)
    (root / "tools" / "tester.py").write_text("import sys\n" + tester_tail)
    from cmx_alebench.problem import load_problem

    copy = load_problem(root)
    ev = _judge(copy, "trivial.py", "python", [0], input_cache, tmp_path / "w")
    assert ev.cases[0].judge_result is verdict and message in ev.cases[0].message
    assert ev.absolute_score == (77 if verdict is JudgeResult.ACCEPTED else 0)


def test_a_memory_killed_run_past_the_time_limit_is_mle(problem: Problem) -> None:
    """The verdict order itself: a run the memory cgroup killed whose time also passed TL is MLE, not TLE."""
    from cmx_alebench.runner import Ending, Ran

    judge = Judge(SandboxRunner(), problem, language("python"))
    slow_oom = Ran(Ending.MEMORY, None, wall_s=3.1, cpu_s=2.5, memory_bytes=256 << 20, stdout=b"", stderr=b"",
                   reason="memory limit reached; the kernel killed 1 process(es)")
    verdict = judge._limit_verdict(0, slow_oom)
    assert verdict is not None and verdict.judge_result is JudgeResult.MEMORY_LIMIT_EXCEEDED
    slow = Ran(Ending.TIME, None, wall_s=3.2, cpu_s=3.1, memory_bytes=10 << 20, stdout=b"", stderr=b"", reason="wall")
    verdict = judge._limit_verdict(0, slow)
    assert verdict is not None and verdict.judge_result is JudgeResult.TIME_LIMIT_EXCEEDED


def test_a_memory_hog_is_mle_20_of_20_beside_another_judge(problem: Problem, input_cache: Path,
                                                           tmp_path: Path) -> None:
    """mle.py on 20 cases while a second judge runs greedy.py (CPU-bound for 0.8 s a case) beside it."""
    import threading

    seeds = list(range(20))
    beside_done = threading.Event()
    beside_verdicts: list[JudgeResult] = []

    def beside() -> None:
        round_ = 0
        while not beside_done.is_set():
            ev = _judge(problem, "greedy.py", "python", [0, 1], input_cache, tmp_path / f"beside{round_}")
            beside_verdicts.append(ev.judge_result)
            round_ += 1

    thread = threading.Thread(target=beside)
    thread.start()
    try:
        ev = _judge(problem, "mle.py", "python", seeds, input_cache, tmp_path / "hog")
    finally:
        beside_done.set()
        thread.join()
    verdicts = [c.judge_result for c in ev.cases]
    assert verdicts == [JudgeResult.MEMORY_LIMIT_EXCEEDED] * 20, [(c.judge_result, c.message) for c in ev.cases]
    assert beside_verdicts and all(v is JudgeResult.ACCEPTED for v in beside_verdicts)


REACTIVE_TESTER = '''
"""A reactive tester: a hidden number from the input; the solution guesses, the tester answers
<, > or =. Score = 1000 - 10 x guesses. Runs the solution itself: tester SOLUTION... < input."""
import subprocess
import sys

hidden = sum(int(t) for t in sys.stdin.read().split()) % 1000
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
guesses = 0
while True:
    line = child.stdout.readline()
    if not line:
        print("wrong answer: the solution ended before guessing the number", file=sys.stderr)
        sys.exit(1)
    try:
        guess = int(line)
    except ValueError:
        print(f"wrong answer: {line.strip()!r} is not a guess", file=sys.stderr)
        child.kill()
        sys.exit(1)
    guesses += 1
    answer = "=" if guess == hidden else ("<" if hidden < guess else ">")
    child.stdin.write(answer + "\\n")
    child.stdin.flush()
    if answer == "=":
        break
child.wait()
print(f"Score = {max(0, 1000 - 10 * guesses)}", file=sys.stderr)
'''

BISECT = '''
import sys
low, high = 0, 999
while True:
    guess = (low + high) // 2
    print(guess, flush=True)
    answer = sys.stdin.readline().strip()
    if answer == "=":
        break
    if answer == "<":
        high = guess - 1
    else:
        low = guess + 1
'''


def _bisect_guesses(hidden: int) -> int:
    low, high, count = 0, 999, 0
    while True:
        guess, count = (low + high) // 2, count + 1
        if guess == hidden:
            return count
        low, high = (low, guess - 1) if hidden < guess else (guess + 1, high)


def _reactive(problem: Problem, tmp_path: Path, tester: str) -> Problem:
    """A copy of ``problem`` made reactive, with ``tester`` as its tester."""
    import json

    from cmx_alebench.problem import load_problem

    root = tmp_path / "reactive"
    shutil.copytree(problem.root, root)
    data = json.loads((root / "data.json").read_text())
    data["metadata"]["problem_type"] = "reactive"
    (root / "data.json").write_text(json.dumps(data))
    (root / "tools" / "tester.py").write_text(tester)
    return load_problem(root)


@pytest.mark.parametrize(("code", "verdict", "message"), [
    (BISECT, JudgeResult.ACCEPTED, ""),
    # the tester exits 1 (after its own 'wrong answer: ' line): ALE-Bench's RUNTIME_ERROR
    ('print("many", flush=True)\n', JudgeResult.RUNTIME_ERROR, "the tester exited 1"),
    ("pass\n", JudgeResult.RUNTIME_ERROR, "the tester exited 1"),
    ("while True:\n    pass\n", JudgeResult.TIME_LIMIT_EXCEEDED, "execution time"),
])
def test_a_reactive_problem_runs_the_solution_under_its_tester(problem: Problem, tmp_path: Path, code: str,
                                                               verdict: JudgeResult, message: str) -> None:
    """The tester runs the solution itself inside the case's call (one sandbox call per case)."""
    reactive = _reactive(problem, tmp_path, REACTIVE_TESTER)
    runner = SandboxRunner()
    inputs = case_inputs(runner, reactive, [0], tmp_path / "cache")
    judge = Judge(runner, reactive, language("python"))
    ev = judge.evaluate(code, inputs, "public", False, tmp_path / "w")
    case = ev.cases[0]
    assert case.judge_result is verdict and message in case.message, case.message
    if verdict is JudgeResult.ACCEPTED:
        hidden = sum(int(t) for t in inputs[0].split()) % 1000
        assert case.absolute_score == 1000 - 10 * _bisect_guesses(hidden)


@pytest.mark.parametrize(("tester", "verdict", "message"), [
    # the tester runs the solution and prints nothing: ALE-Bench's RUNTIME_ERROR
    ("import subprocess, sys\nsubprocess.run(sys.argv[1:], stdin=sys.stdin)\n", JudgeResult.RUNTIME_ERROR,
     "printed nothing"),
    # a score line, then another line: WRONG_ANSWER, as for a batch tester
    ('import sys\nprint("Score = 5", file=sys.stderr)\nprint("bye", file=sys.stderr)\n', JudgeResult.WRONG_ANSWER,
     "a line after"),
    ('import sys\nprint("Score = 5", file=sys.stderr)\n', JudgeResult.ACCEPTED, ""),
])
def test_a_reactive_testers_silence_is_a_runtime_error(problem: Problem, tmp_path: Path, tester: str,
                                                       verdict: JudgeResult, message: str) -> None:
    reactive = _reactive(problem, tmp_path, tester)
    runner = SandboxRunner()
    inputs = case_inputs(runner, reactive, [0], tmp_path / "cache")
    ev = Judge(runner, reactive, language("python")).evaluate("pass\n", inputs, "public", False, tmp_path / "w")
    case = ev.cases[0]
    assert case.judge_result is verdict and message in case.message, case.message


def test_each_case_is_reported_as_it_is_judged(problem: Problem, input_cache: Path, tmp_path: Path) -> None:
    """The step's live ``cases_judged`` (cmx-core's application channel) comes from here."""
    seeds = list(problem.seed_list("public", False))
    runner = SandboxRunner()
    inputs = case_inputs(runner, problem, seeds, input_cache)
    seen: list[int] = []
    judge = Judge(runner, problem, language("python"), num_workers=2, on_case=lambda case: seen.append(case.seed))
    evaluation = judge.evaluate((SOLUTIONS / "trivial.py").read_text(), inputs, "public", False, tmp_path)
    assert sorted(seen) == sorted(seeds) == sorted(c.seed for c in evaluation.cases)


def test_a_cases_scratch_is_counted_and_removed_even_where_the_program_locked_it(tmp_path: Path) -> None:
    """What a solution leaves in its work dir is scratch: its bytes are counted (links not
    followed), then it is removed, a folder it made unreadable included."""
    from cmx_alebench.judge import clear_scratch

    run = tmp_path / "run"
    (run / "deep" / "locked").mkdir(parents=True)
    (run / "deep" / "locked" / "a.bin").write_bytes(b"x" * 1000)
    (run / "b.txt").write_bytes(b"y" * 24)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"z" * 5000)
    (run / "link").symlink_to(outside)
    (run / "deep" / "locked").chmod(0)
    assert clear_scratch(run) == 1024 and list(run.iterdir()) == []
    assert outside.read_bytes() == b"z" * 5000  # a link's target is not the case's
