"""Rust solutions with AtCoder's crates (those Debian packages), judged for real in the sandbox:
one that uses itertools, rand and num is ACCEPTED with the same scores as the std-only solution,
one that uses proconio (which Debian does not package) is a compile error that names it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import Problem, shipped_solutions
from cmx_alebench.rust_crates import (
    ATCODER_CRATES,
    BOOKWORM_PACKAGED,
    CrateSet,
    explain_missing,
)
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.verdicts import JudgeResult

pytestmark = pytest.mark.usefixtures("sandbox_ready")

WITH_CRATES = r'''
// cmx001: every depot at the centre; the customers read with itertools, the centre drawn from a
// seeded rand generator over a one-point range, the demand summed in a num BigInt.
use itertools::Itertools;
use num::BigInt;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::{self, Read, Write};

fn main() {
    let mut text = String::new();
    io::stdin().read_to_string(&mut text).unwrap();
    let values: Vec<i64> = text.split_whitespace().map(|t| t.parse().unwrap()).collect();
    let (n, k) = (values[0] as usize, values[1] as usize);
    let demand: BigInt = values[2..2 + 3 * n].iter().tuples().map(|(_, _, d)| BigInt::from(*d)).sum();
    assert!(demand > BigInt::from(0));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut out = io::stdout().lock();
    for _ in 0..k {
        let x: i64 = rng.gen_range(5000..5001);
        writeln!(out, "{} {}", x, x).unwrap();
    }
}
'''

WITH_PROCONIO = r'''
use proconio::input;

fn main() {
    input! { n: usize, k: usize }
    for _ in 0..k { println!("5000 5000"); }
    let _ = n;
}
'''


def _judge(problem: Problem, code: str, cache: Path, input_cache: Path, work: Path) -> tuple[object, object]:
    runner = SandboxRunner()
    inputs = case_inputs(runner, problem, [0, 1], input_cache)
    lang = language("rust", cache=cache)
    return lang, Judge(runner, problem, lang).evaluate(code, inputs, "public", False, work)


def test_a_solution_using_debian_packaged_crates_is_accepted(problem: Problem, input_cache: Path,
                                                             crates_cache: Path, tmp_path: Path) -> None:
    lang, ev = _judge(problem, WITH_CRATES, crates_cache, input_cache, tmp_path / "crates")
    assert ev.judge_result is JudgeResult.ACCEPTED, ev.compile_message  # type: ignore[attr-defined]
    assert isinstance(lang.crates, CrateSet)  # type: ignore[attr-defined]
    assert {"itertools", "num", "rand", "rand_chacha"} <= set(lang.crates.externs)  # type: ignore[attr-defined]
    _, plain = _judge(problem, (shipped_solutions() / "trivial.rs").read_text(), crates_cache, input_cache,
                      tmp_path / "plain")
    assert [c.absolute_score for c in ev.cases] == [c.absolute_score for c in plain.cases]  # type: ignore[attr-defined]


def test_a_solution_using_a_crate_debian_lacks_is_a_compile_error_naming_it(
        problem: Problem, input_cache: Path, crates_cache: Path, tmp_path: Path) -> None:
    lang, ev = _judge(problem, WITH_PROCONIO, crates_cache, input_cache, tmp_path / "proconio")
    assert ev.judge_result is JudgeResult.COMPILATION_ERROR  # type: ignore[attr-defined]
    first = ev.compile_message.splitlines()[0]  # type: ignore[attr-defined]
    assert first.startswith("crate proconio of AtCoder's Rust set is not available on this judge"), first
    assert "proconio" in "\n".join(ev.compile_message.splitlines()[1:])  # rustc's own message follows
    assert "proconio" in lang.crates.missing  # type: ignore[attr-defined]


def test_only_crates_of_atcoders_set_the_judge_lacks_are_named() -> None:
    offered = CrateSet(Path("/nowhere"), {"itertools": "libitertools-1.rlib"}, ("proconio",), ())
    own = "error[E0432]: unresolved import `mything`\n"
    assert explain_missing(own, offered) == own               # not AtCoder's: rustc's message alone
    offered_use = "error[E0432]: unresolved import `itertools::Foo`\n"
    assert explain_missing(offered_use, offered) == offered_use
    lacking = "error[E0433]: failed to resolve: use of undeclared crate or module `superslice`\n"
    assert explain_missing(lacking, offered).startswith("crate superslice of AtCoder's Rust set is not available")
    assert "no crates are offered" in explain_missing(lacking, None).splitlines()[0]


def test_the_docs_list_every_crate_of_atcoders_set_and_whether_debian_packages_it() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "alebench.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([A-Za-z0-9_-]+)` \| (yes|no) \|", docs, flags=re.MULTILINE))
    assert set(rows) == set(ATCODER_CRATES)
    assert {c for c, packaged in rows.items() if packaged == "yes"} == set(BOOKWORM_PACKAGED)
