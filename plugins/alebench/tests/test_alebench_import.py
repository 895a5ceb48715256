"""``cmx import ale-bench`` (and its older spelling ``cmx ale-bench import``) on the shipped
Rust-tools problem cmx002, zipped as a package is:
the crate built offline with Debian's cargo against Debian's librust-*-dev registry, once
(a second import reuses it), then judged with the real gen and tester binaries, one test
solution per verdict; missing crates named in one line; a vendored directory accepted."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cmx_alebench.importer import import_package
from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import load_problem, shipped_dir, shipped_solutions
from cmx_alebench.rust_build import DEBIAN_REGISTRY
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.verdicts import JudgeResult
from cmx_core.errors import UsageError

CMX002 = shipped_dir() / "cmx002"
SOLUTIONS = shipped_solutions() / "cmx002"

pytestmark = pytest.mark.usefixtures("sandbox_ready")


def _zip(folder: Path, archive: Path) -> Path:
    """The package as ALE-Bench ships one: a zip holding <problem_id>/..."""
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "target" not in path.relative_to(folder).parts:
                zipped.write(path, Path(folder.name) / path.relative_to(folder))
    return archive


def cmx(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CMX_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cmx_core", *args], capture_output=True, text=True, env=env,
                          timeout=900, check=False)


@pytest.fixture(scope="module")
def imported(debian_rust: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """cmx002 zipped, imported twice through the CLI into a private CMX_HOME: as the issue
    spells it (``cmx import ale-bench``), then with the older ``cmx ale-bench import``."""
    home = tmp_path_factory.mktemp("home")
    archive = _zip(CMX002, tmp_path_factory.mktemp("zip") / "cmx002.zip")
    first = cmx(home, "import", "ale-bench", str(archive), "--json")
    assert first.returncode == 0, first.stderr[-2000:]
    second = cmx(home, "ale-bench", "import", str(archive), "--json")
    assert second.returncode == 0, second.stderr[-2000:]
    return {"home": home, "first": json.loads(first.stdout)["imported"][0],
            "second": json.loads(second.stdout)["imported"][0]}


def test_the_zip_imports_and_builds_once(imported: dict[str, Any]) -> None:
    first, second = imported["first"], imported["second"]
    assert first["problem_id"] == "cmx002" and first["tools"] == "rust" and first["built_now"] is True
    assert second["built_now"] is False and second["bin_dir"] == first["bin_dir"]    # keyed by the crate's content
    assert Path(first["bin_dir"]).name == first["crate_digest"]
    assert all((Path(first["bin_dir"]) / name).is_file() for name in ("gen", "tester", "vis"))
    record = json.loads((Path(first["dest"]) / "cmx-tools.json").read_text())
    assert record["registry"] == str(DEBIAN_REGISTRY) and record["bin_dir"] == first["bin_dir"]


def _nearest_neighbour_score(case_input: bytes) -> int:
    """cmx002's score of ac.py's tour, computed here from the statement."""
    rows = case_input.decode().split()
    n = int(rows[0])
    pts = [(int(rows[1 + 2 * i]), int(rows[2 + 2 * i])) for i in range(n)]
    left, order = set(range(1, n)), [0]
    while left:
        x, y = pts[order[-1]]
        nxt = min(left, key=lambda j: (math.hypot(pts[j][0] - x, pts[j][1] - y), j))
        left.remove(nxt)
        order.append(nxt)
    length = sum(math.hypot(pts[a][0] - pts[b][0], pts[a][1] - pts[b][1])
                 for a, b in zip(order, order[1:] + order[:1], strict=True))
    return round(1e6 * 100 * n / (100 * n + length))


@pytest.mark.parametrize(("solution", "lang", "verdict"), [
    ("ac.py", "python", JudgeResult.ACCEPTED),
    ("wa.py", "python", JudgeResult.WRONG_ANSWER),
    ("re.py", "python", JudgeResult.RUNTIME_ERROR),
    ("tle.py", "python", JudgeResult.TIME_LIMIT_EXCEEDED),
    ("mle.py", "python", JudgeResult.MEMORY_LIMIT_EXCEEDED),
    ("ole.py", "python", JudgeResult.OUTPUT_LIMIT_EXCEEDED),
    ("ce.cpp", "cpp17", JudgeResult.COMPILATION_ERROR),
])
def test_a_verdict_per_test_solution(imported: dict[str, Any], tmp_path: Path, solution: str, lang: str,
                                     verdict: JudgeResult) -> None:
    problem = load_problem(Path(imported["first"]["dest"]))
    runner = SandboxRunner()
    inputs = case_inputs(runner, problem, [0], tmp_path / "cache")      # the real gen binary: in/0000.txt
    assert inputs[0].split()[0] == b"%d" % (len(inputs[0].splitlines()) - 1)
    judge = Judge(runner, problem, language(lang))
    ev = judge.evaluate((SOLUTIONS / solution).read_text(), inputs, "public", False, tmp_path / "w")
    assert ev.judge_result is verdict, ev.cases[0].message
    if verdict is JudgeResult.ACCEPTED:                                   # the real tester binary's score
        assert ev.absolute_score == _nearest_neighbour_score(inputs[0]) > 0
    if verdict is JudgeResult.WRONG_ANSWER:
        assert "visited twice" in ev.cases[0].message or "exited 1" in ev.cases[0].message


def test_the_recipe_judges_the_imported_problem(imported: dict[str, Any]) -> None:
    proc = cmx(imported["home"], "run", "recipe", "--tags=ale-bench,private-eval", "--problem=cmx002",
               f"--code={SOLUTIONS / 'ac.py'}", "--language=python", "--num-workers=2", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["benchmark"]["task"] == "cmx002" and doc["metrics"]["accepted_cases"]["value"] == 10
    assert doc["metrics"]["rank"]["value"] is not None and doc["benchmark"]["division"] == "unofficial"


def test_missing_crates_are_named_in_one_line(debian_rust: None, tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    shutil.copytree(CMX002, package, ignore=shutil.ignore_patterns("target"))
    manifest = package / "tools" / "Cargo.toml"
    extra = '[dependencies]\nproconio = "0.4"\nsvg = "0.13"\n'
    manifest.write_text(manifest.read_text().replace("[dependencies]\n", extra))
    with pytest.raises(UsageError) as info:
        import_package(package, tmp_path / "cache")
    message = str(info.value)
    assert "crates not in /usr/share/cargo/registry: proconio, svg" in message and "--vendor" in message
    assert "\n" not in message


def test_version_pins_the_registry_cannot_meet_are_named_with_what_it_has(debian_rust: None,
                                                                         tmp_path: Path) -> None:
    """The shape of a published AHC tools crate: exact pins of older crates than Debian's, and
    crates Debian lacks; every one is named in one line before cargo runs."""
    package = tmp_path / "pkg"
    shutil.copytree(CMX002, package, ignore=shutil.ignore_patterns("target"))
    manifest = package / "tools" / "Cargo.toml"
    text = manifest.read_text()
    body = text[text.index("[dependencies]"):].split("\n[", 1)
    pinned = ('[dependencies]\nrand = "=0.7.3"\nrand_chacha = { version = "=0.2.2" }\nitertools = "0.10"\n'
              'proconio = "=0.3.6"\nsvg = "0.9"\n')
    manifest.write_text(text[:text.index("[dependencies]")] + pinned + ("\n[" + body[1] if len(body) > 1 else ""))
    with pytest.raises(UsageError) as info:
        import_package(package, tmp_path / "cache")
    message = str(info.value)
    assert "crates not in /usr/share/cargo/registry: proconio, svg" in message
    assert re.search(r"version pins /usr/share/cargo/registry cannot meet: rand =0\.7\.3 \(has 0\.8\.\d+\); "
                     r"rand_chacha =0\.2\.2 \(has 0\.3\.\d+\)", message), message
    assert "itertools" not in message.split("cannot meet:")[1]   # 0.10 is a caret requirement Debian meets
    assert "--vendor DIR" in message and "\n" not in message


def test_a_vendored_directory_is_accepted(debian_rust: None, tmp_path: Path) -> None:
    """A vendor folder in cargo vendor's layout (crate folders with .cargo-checksum.json),
    here made of the Debian crates cmx002 needs, is what the build uses instead of Debian's."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for crate in DEBIAN_REGISTRY.iterdir():
        if (crate / ".cargo-checksum.json").is_file():
            shutil.copytree(crate, vendor / crate.name, symlinks=False)
    done = import_package(CMX002, tmp_path / "cache", dest=tmp_path / "problems", vendor=vendor)
    record = json.loads((done.dest / "cmx-tools.json").read_text())
    assert done.built_now and record["registry"] == str(vendor.resolve())
    empty = tmp_path / "empty-vendor"
    empty.mkdir()
    with pytest.raises(UsageError, match=r"crates not in .*empty-vendor: itertools, rand, rand_chacha"):
        import_package(CMX002, tmp_path / "cache2", vendor=empty)


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda p: p.write_bytes(b"not a zip"), "not a zip file"),
    (lambda p: zipfile.ZipFile(p, "w").writestr("../evil/data.json", "{}"), "leaves the package"),
    (lambda p: zipfile.ZipFile(p, "w").writestr("readme.txt", "x"), "no data.json"),
])
def test_bad_packages_are_one_line_exit_2(tmp_path: Path, make: Any, fragment: str) -> None:
    archive = tmp_path / "bad.zip"
    make(archive)
    for spelling in (("ale-bench", "import"), ("import", "ale-bench")):
        proc = cmx(tmp_path / "home", *spelling, str(archive))
        assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr
        assert str(archive) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_dependencies_read_without_tomllib_match_tomllib(tmp_path: Path) -> None:
    """The Python 3.10 line reader of [dependencies] gives tomllib's names (renamed and path crates too)."""
    from cmx_alebench.rust_build import _dependencies_by_line, direct_dependencies

    manifest = tmp_path / "Cargo.toml"
    manifest.write_text('[package]\nname = "tools"\n\n[dependencies]\nrand = "0.8"  # the rng\n'
                        'chacha = { package = "rand_chacha", version = "0.3" }\nlocal = { path = "../x" }\n'
                        '\n[dev-dependencies]\nproptest = "1"\n')
    assert direct_dependencies(manifest) == ["rand", "rand_chacha"]
    by_line = _dependencies_by_line(manifest.read_text())
    names = sorted(v["package"] if isinstance(v, dict) and "package" in v else k for k, v in by_line.items()
                   if not (isinstance(v, dict) and "path" in v))
    assert names == ["rand", "rand_chacha"]


def test_an_unbuilt_rust_problem_is_imported_on_first_use(debian_rust: None, tmp_path: Path) -> None:
    """The shipped cmx002 (a crate, no binaries) judged straight from the recipe: built into this home's cache."""
    home = tmp_path / "home"
    proc = cmx(home, "run", "recipe", "--tags=ale-bench,lite,public-eval", "--problems=cmx002",
               f"--code={SOLUTIONS / 'ac.py'}", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["ale_bench"]["problems"][0]["problem_id"] == "cmx002"
    assert doc["metrics"]["accepted_cases"]["value"] == 2          # public_lite: seeds 0 and 1
    installed = list(home.rglob("alebench/problems/cmx002/cmx-tools.json"))
    assert len(installed) == 1 and not (CMX002 / "cmx-tools.json").exists()   # the shipped package is untouched
