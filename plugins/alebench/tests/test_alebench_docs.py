"""docs/alebench.md held to the code: every figure and name it states is read from here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx_alebench import judge, languages, verdicts
from cmx_alebench.problem import Problem, load_problem, shipped_dir, shipped_solutions
from cmx_alebench.standings import load_performance, load_standings, place

DOC = Path(__file__).resolve().parents[3] / "docs" / "alebench.md"


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text()


def test_limits_and_priority(doc: str, problem: Problem) -> None:
    assert f"bounded by {judge.COMPILE_TIMEOUT_S:g} s" in doc
    assert f"{judge.OUTPUT_LIMIT_BYTES >> 20} MiB of output" in doc
    limits = judge.case_limits(problem)
    assert (limits.wall_s, limits.cpu_s) == (3.2, 3.1)   # ceil(2.0 + 0.1) + 0.2 and + 0.1, as the doc writes
    assert "ceil(TL + 0.1) + 0.2 s" in doc and "ceil(TL + 0.1) + 0.1 s" in doc
    order = " > ".join({"INTERNAL_ERROR": "IE", "WRONG_ANSWER": "WA", "RUNTIME_ERROR": "RE",
                        "TIME_LIMIT_EXCEEDED": "TLE", "MEMORY_LIMIT_EXCEEDED": "MLE",
                        "OUTPUT_LIMIT_EXCEEDED": "OLE", "COMPILATION_ERROR": "CE"}[v.value] for v in verdicts.PRIORITY)
    assert f"**{order}**" in doc


def test_languages_and_solutions(doc: str) -> None:
    assert all(f"`{name}`" in doc for name in languages.NAMES)
    named = set(re.findall(r"`([a-z]+\.(?:py|cpp|rs))`", doc)) - {"gen.py", "tester.py", "tester.rs", "vis.rs"}
    assert named == {p.name for p in shipped_solutions().iterdir() if p.suffix in (".py", ".cpp", ".rs")}
    greedy = (shipped_solutions() / "greedy.py").read_text()
    assert "BUDGET_S = 0.8" in greedy and "0.8 s budget" in doc


def test_the_shipped_problem_as_described(doc: str) -> None:
    problem = load_problem(shipped_dir() / "cmx001")
    assert len(problem.seeds["public"]) == 5 and len(problem.seeds["private"]) == 10
    assert "5 public and 10 private seeds" in doc
    assert problem.constraints.time_limit_s == 2.0 and problem.constraints.memory_limit_bytes == 256 << 20
    assert "2.0 s time limit" in doc and "256 MiB memory limit" in doc
    assert json.loads((problem.root / "data.json").read_text())["standings_source"] == "synthetic"


def test_the_tie_example(doc: str) -> None:
    root = shipped_dir() / "cmx001"
    spot = place(239477, load_standings(root / "standings_scores.csv"))
    performance = load_performance(root / "performance.csv").performance(spot.rank_for_performance)
    assert (spot.rank, spot.rank_for_performance, performance) == (24, 25.0, 1000)
    assert "239477, ties three rows at\nranks 24-26: rank 24, performance 1000 (the value at key 25)" in doc


def test_recipe_inputs_are_documented(doc: str) -> None:
    import yaml

    recipe = yaml.safe_load((shipped_dir().parent / "recipes" / "ale-bench.yaml").read_text())
    for name in recipe["inputs"]:
        flag = "--num-workers" if name == "num_workers" else f"--{name}"
        assert f"`{flag}`" in doc or (name == "mode" and "public-eval" in doc), name
    assert set(recipe["variations"]) == {"public-eval", "private-eval", "lite"}


def test_the_readme_cost_section_names_what_exists() -> None:
    import inspect

    from cmx_alebench.sandbox_runner import SandboxRunner

    root = Path(__file__).resolve().parents[3]
    readme = (root / "plugins" / "alebench" / "README.md").read_text()
    assert "SandboxRunner(sessions=False)" in readme
    assert inspect.signature(SandboxRunner).parameters["sessions"].default is True
    anchor = re.search(r"docs/sandbox\.md#([a-z-]+)", readme.split("## Measured cost", 1)[1])
    assert anchor is not None
    headings = [re.sub(r"[^a-z -]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", (root / "docs" / "sandbox.md").read_text(), re.M)]
    assert anchor.group(1) in headings
    bench = (root / "benchmarks" / "bench_alebench.py").read_text()
    assert '"--cases", type=int, default=50' in bench and 'default="trivial.py"' in bench


def test_rank_rules_as_described(doc: str, tmp_path: Path) -> None:
    """The rank section's hand-checked rows and the property test's size, read from the tests that check them."""
    from importlib import util

    here = Path(__file__).parent

    def module(name: str):  # type: ignore[no-untyped-def]
        spec = util.spec_from_file_location(name, here / f"{name}.py")
        assert spec is not None and spec.loader is not None
        loaded = util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded

    prop, hand = module("test_alebench_rank_property"), module("test_alebench_standings")
    assert prop.N_STANDINGS == 10_000 and "10,000 random AtCoder-form standings" in doc and "0 differences" in doc
    (tmp_path / "s.csv").write_text(hand.ISSUE_STANDINGS)
    (tmp_path / "p.csv").write_text(hand.ISSUE_PERFORMANCE)
    groups, table = load_standings(tmp_path / "s.csv"), load_performance(tmp_path / "p.csv")
    for total, rank, performance, words in [(85000, 5, 2300, "85000 gets rank 5 and performance 2300"),
                                            (120000, 1, 3133, "120000 gets rank 1 and 3133"),
                                            (70000, 8, 1850, "70000 gets rank 8 and 1850"),
                                            (5, 11, 0, "5 points get rank 11")]:
        spot = place(total, groups)
        assert (spot.rank, table.performance(spot.rank_for_performance)) == (rank, performance)
        assert words in " ".join(doc.split())
    assert max(table.values) == 3000 and "above the table's 3000" in doc
    assert "1850.5 gives 1850" in doc and round(1850.5) == 1850


def test_tester_protocol_as_described(doc: str) -> None:
    from cmx_alebench.tools import read_tester

    words = " ".join(doc.split())
    assert "a tester that exits non-zero is WRONG_ANSWER even when it printed a score" in words
    assert read_tester(b"Score = 5\n", 1).score is None
    assert "one that exits 0 without a score line is WRONG_ANSWER too" in words
    assert read_tester(b"ok\n", 0).wrong_answer is not None
    assert "a prefix match: text may follow it" in words and read_tester(b"x\nScore = 5 ok\n", 0).score == 5
    assert "a line printed after the score line" in words and read_tester(b"Score = 5\nx\n", 0).score is None
    assert "a `wrong answer: ` line" in words and read_tester(b"wrong answer: no\nScore = 5\n", 0).score is None
    assert "a negative score" in words and read_tester(b"Score = -5\n", 0).score is None
    from cmx_alebench.tools import read_reactive_tester

    assert "a reactive tester that exits non-zero or prints nothing is RUNTIME_ERROR" in words
    assert read_reactive_tester(b"wrong answer: x\n", 1).runtime_error is not None
    assert read_reactive_tester(b"", 0).runtime_error is not None


def test_importing_as_described(doc: str) -> None:
    from cmx_alebench import importer, rust_build, tools
    from cmx_alebench.problem import shipped_dir, shipped_solutions

    words = " ".join(doc.split())
    assert "cmx ale-bench import" in doc and f"`{tools.BUILT_RECORD}`" in doc
    assert f"`{rust_build.DEBIAN_REGISTRY}`" in doc and "`CMX_ALEBENCH_CARGO`" in doc
    assert importer.imported_dir(Path("C")) == Path("C/alebench/problems")
    assert "`alebench/problems/<problem_id>`" in doc
    assert "`<cache>/alebench/tools/<digest>`" in doc
    assert rust_build.BINARIES == ("gen", "tester", "vis")
    assert f"crates not in {rust_build.DEBIAN_REGISTRY}: proconio, svg" in doc
    crate = shipped_dir() / "cmx002" / "tools"
    assert {p.name for p in (crate / "src" / "bin").iterdir()} == {"gen.rs", "tester.rs", "vis.rs"}
    assert rust_build.direct_dependencies(crate / "Cargo.toml") == ["itertools", "rand", "rand_chacha"]
    assert "(rust, rand_chacha, itertools)" not in words and "rand, rand_chacha, itertools" in words
    for package in ("librust-rand-dev", "librust-rand-chacha-dev", "librust-itertools-dev"):
        assert package in words
    names = {p.stem for p in (shipped_solutions() / "cmx002").iterdir() if p.name != "__pycache__"}
    assert names == {"ac", "wa", "re", "tle", "mle", "ole", "ce"}
    assert "AC (a nearest-neighbour tour), WA, RE, TLE, MLE, OLE and CE" in words
    problem = load_problem(shipped_dir() / "cmx002")
    assert json.loads((problem.root / "data.json").read_text())["standings_source"] == "synthetic"
    assert "reactive problems are not judged" not in words
    assert "runs the solution itself (`tester SOLUTION...`)" in words
    assert "MLE on all 20" in words


def test_toolchain_as_described(doc: str) -> None:
    from cmx_alebench import toolchain

    words = " ".join(doc.split())
    before, _ = toolchain.cpp_flags("gnu++20")
    assert before[1:5] == ["-O2", "-DONLINE_JUDGE", "-DATCODER", "-march=native"]
    assert "-O2 -DONLINE_JUDGE -DATCODER -march=native" in words and "`-lgmpxx -lgmp`" in words
    assert set(toolchain.libraries()) == {"source", "image", "image_id", "gxx", "cpp23", "march", "boost", "gmp",
                                          "eigen", "atcoder_library", "notes"}
    for key in ("source", "image", "image_id", "gxx", "cpp23", "march", "boost", "gmp", "eigen", "atcoder_library"):
        assert f"`{key}`" in doc
    assert "**The AtCoder Library is not packaged by Debian**" in words and "not packaged" in toolchain.ATCODER_NOTE
    assert "/opt/ac-library" in toolchain.ATCODER_DIRS and "`/opt/ac-library`" in doc
    assert "mounts into the sandbox judge's compile" in words and "def test_a_solution_using_the_installed_atcoder" in (
        DOC.parents[1] / "plugins" / "alebench" / "tests" / "test_alebench_toolchain.py").read_text()
    root = DOC.parents[1] / "containers" / "ale-bench-judge"
    assert (root / "template.yaml").is_file() and (root / "apt.lock").is_file()
    assert "python -m cmx_docker.aptlock ale-bench-judge" in (root / "apt.lock").read_text().splitlines()[0]
    assert "Its `apt.lock` was recorded with `python -m cmx_docker.aptlock ale-bench-judge`" in words
    assert "`DockerRunner(image=REF, host_usr=False)`" in doc and "`CMX_ALEBENCH_JUDGE_IMAGE`" in doc


def test_judge_image_as_described(doc: str) -> None:
    """The --judge_image section: its anchor, the missing-image line, the recorded keys, the module."""
    from cmx_alebench import judge_image

    words = " ".join(doc.split())
    headings = [re.sub(r"[^a-z -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", doc, re.M)]
    assert "the-judge-image-as-the-sandboxs-toolchain" in headings
    assert "(#the-judge-image-as-the-sandboxs-toolchain)" in words
    assert " ".join(judge_image.BUILD_HINT.replace("`", "").split()) in words
    assert "`<cache>/alebench/rootfs/<image ID>`" in words and "`SandboxSpec.root_fs`" in words
    assert "`tests/test_alebench_judge_image.py`" in words
    readme = (DOC.parents[1] / "plugins" / "alebench" / "README.md").read_text()
    assert "| `judge_image.py` |" in readme


def test_relative_formula_as_described(doc: str) -> None:
    from cmx_alebench.relative import Contestants, rescale
    from cmx_alebench.scoring import RelativeType, relative_score

    words = " ".join(doc.split())
    assert "but n, the number of submissions, counts it" in words
    assert relative_score(RelativeType.RANK_MAX, 15, [10, 20], 100, rejected=1) == 75     # n = 4, not 3
    assert "(half to even: 62.5 gives 62)" in words
    assert relative_score(RelativeType.RANK_MAX, 5, [10, 5, 1], 100) == 62
    assert "rounded half up in exact integers" in words and "so M = 10^9 is exact" in words
    assert relative_score(RelativeType.MAX, 38254217, [123456791], 10**9) == 309859155     # 309859155.5 in floats
    assert relative_score(RelativeType.MAX, 50, [80], 100) == 63                           # 62.5 exactly: up
    assert "a total of 0 takes the standings file's score-0 row's rank" in words
    scaled = rescale(RelativeType.MAX, 100, [0], Contestants(((5,), (0,))))
    assert scaled.placement(40).rank == 40
    assert "adds max(0.5·(tied + 1) \u2212 1, 0)" in words
    tied = rescale(RelativeType.MAX, 100, [5], Contestants(((5,), (5,), (10,))))           # ours 50, two others 50
    assert (tied.placement(9).rank, tied.placement(9).rank_for_performance) == (2, 2.5)
