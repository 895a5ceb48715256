"""The judge's C++ toolchain (g++ 12 with Boost, GMP and Eigen, -march=native, C++23 where g++
has it), judged for real on the sandbox: a solution that includes Boost, Eigen and GMP headers
compiles and is ACCEPTED, and every result records which libraries the toolchain holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_alebench import toolchain
from cmx_alebench.inputs import case_inputs
from cmx_alebench.judge import Judge
from cmx_alebench.languages import language
from cmx_alebench.problem import Problem
from cmx_alebench.runner import Call, CallLimits
from cmx_alebench.rust_crates import BOOKWORM_PACKAGED, DEFAULT_FEATURE_PACKAGES, IMAGE_CRATES, debian_package
from cmx_alebench.sandbox_runner import SandboxRunner
from cmx_alebench.verdicts import JudgeResult

pytestmark = pytest.mark.usefixtures("sandbox_ready")

LIBRARIES_CPP = r'''
// cmx001 with Boost, Eigen and GMP: every depot at the centre, the centre computed by Eigen,
// the customer count parsed with boost::lexical_cast, the demand summed in a GMP integer.
#include <boost/lexical_cast.hpp>
#include <boost/algorithm/string.hpp>
#include <Eigen/Dense>
#include <gmpxx.h>
#include <iostream>
#include <string>
#include <vector>
int main() {
    std::string line;
    std::getline(std::cin, line);
    std::vector<std::string> head;
    boost::split(head, line, boost::is_any_of(" "));
    int n = boost::lexical_cast<int>(head[0]), k = boost::lexical_cast<int>(head[1]);
    mpz_class demand = 0;
    for (int i = 0; i < n; ++i) { long x, y, d; std::cin >> x >> y >> d; demand += d; }
    Eigen::Vector2d centre = Eigen::Vector2d::Constant(10000.0) / 2.0;
    if (demand <= 0) return 1;
    for (int i = 0; i < k; ++i) std::cout << int(centre(0)) << " " << int(centre(1)) << "\n";
}
'''


def _dpkg_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True,
                         check=False).stdout
    return out


def _installed_atcoder(root: Path = Path("/")) -> str | None:
    """Where this machine holds the AtCoder Library (header-only: ``atcoder/all`` and its .hpp
    files), ALE-Bench's /opt/ac-library first; None where it holds none (Debian has no package)."""
    held = [d for d in ("/opt/ac-library", "/usr/include") if (root / d.lstrip("/") / "atcoder" / "all").is_file()]
    return held[0] if held else None


def test_the_recorded_libraries_are_the_installed_ones(libraries_installed: None) -> None:
    found = toolchain.libraries()
    assert found["boost"] and _dpkg_version("libboost-dev").startswith(found["boost"])   # e.g. 1.74 / 1.74.0.3
    assert found["eigen"] and _dpkg_version("libeigen3-dev").startswith(found["eigen"])  # 3.4.0 / 3.4.0-4
    assert found["gmp"] and found["gmp"] in _dpkg_version("libgmp-dev")                   # 6.2.1 / 2:6.2.1+dfsg1
    assert found["gxx"] == subprocess.run(["g++", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    # the AtCoder Library as this machine holds it: absent on most, /opt/ac-library on ALE-Bench's judge (#52)
    assert found["march"] == "native" and found["atcoder_library"] == _installed_atcoder()
    if _installed_atcoder() is None:
        assert found["notes"] == [toolchain.ATCODER_NOTE] and "not packaged" in found["notes"][0]
    else:
        assert found["notes"] == []


@pytest.mark.parametrize("folder", ["/opt/ac-library", "/usr/include", None])
def test_the_atcoder_library_is_recorded_where_the_root_holds_it(tmp_path: Path, folder: str | None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A scratch root with the AtCoder Library (or without it), not the machine's: recorded,
    and on the include path unless it is in the system's own."""
    monkeypatch.setattr(toolchain, "HOST_ROOT", tmp_path / "a-host-without-it")
    if folder is not None:
        _plant_atcoder(tmp_path / folder.lstrip("/"))
    chain = toolchain.Toolchain(root=tmp_path, probe=lambda argv, stdin: None)
    found = toolchain.libraries(chain)
    assert found["atcoder_library"] == folder == _installed_atcoder(tmp_path)
    assert found["notes"] == ([] if folder else [toolchain.ATCODER_NOTE])
    assert ("-I/opt/ac-library" in chain.flags("gnu++20")[0]) == (folder == "/opt/ac-library")
    mounted = {str(tmp_path / "opt/ac-library"): "/opt/ac-library"} if folder == "/opt/ac-library" else {}
    assert language("cpp20", chain).binds == mounted       # the sandbox judge sees only the root's /usr


def _plant_atcoder(folder: Path) -> None:
    headers = folder / "atcoder"
    headers.mkdir(parents=True)
    (headers / "all").write_text('#include "atcoder/dsu"\n')
    (headers / "dsu.hpp").write_text("namespace atcoder { struct dsu {}; }\n")


def test_a_judge_image_without_the_atcoder_library_borrows_the_hosts(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian does not package the AtCoder Library, so the judge image has none: where the
    host has it at /opt/ac-library, the image's compile mounts that, read-only, and the
    result says whose it is."""
    host, image = tmp_path / "host", tmp_path / "image-root"
    (image / "usr").mkdir(parents=True)
    _plant_atcoder(host / "opt" / "ac-library")
    monkeypatch.setattr(toolchain, "HOST_ROOT", host)
    chain = toolchain.Toolchain(root=image, image="cmx/ale-bench-judge:x", probe=lambda argv, stdin: None)
    assert toolchain.borrows_atcoder(image) and not toolchain.borrows_atcoder(host)
    assert "-I/opt/ac-library" in chain.flags("gnu++20")[0]
    assert language("cpp20", chain).binds == {str(host / "opt" / "ac-library"): "/opt/ac-library"}
    found = toolchain.libraries(chain)
    assert found["atcoder_library"] == "/opt/ac-library" and "the host's /opt/ac-library" in found["notes"][0]
    _plant_atcoder(image / "opt" / "ac-library")  # an image that has its own keeps it
    assert not toolchain.borrows_atcoder(image)
    assert language("cpp20", chain).binds == {str(image / "opt" / "ac-library"): "/opt/ac-library"}


def test_a_solution_using_the_installed_atcoder_library_compiles(libraries_installed: None, tmp_path: Path) -> None:
    """Where the machine holds the AtCoder Library (ALE-Bench's judge does), the sandbox judge's
    compile sees it, as the result records it."""
    if _installed_atcoder() is None:
        pytest.skip("this machine holds no AtCoder Library (/opt/ac-library/atcoder)")
    (tmp_path / "main.cpp").write_text("#include <atcoder/all>\nint main() { atcoder::dsu d(2); d.merge(0, 1); "
                                       "return d.same(0, 1) ? 0 : 1; }\n")
    compiler = language("cpp20")
    assert compiler.compile is not None
    done = SandboxRunner().run(Call(compiler.compile, tmp_path, CallLimits(120.0, 120.0, 1 << 30, 1 << 20),
                                    compiler.binds, compiler.env))
    assert done.exit_code == 0, done.stderr.decode(errors="replace")[-2000:]


@pytest.mark.parametrize("lang", ["cpp20", "cpp23"])
def test_boost_eigen_gmp_solution_is_accepted(libraries_installed: None, problem: Problem, input_cache: Path,
                                              tmp_path: Path, lang: str) -> None:
    if lang == "cpp23" and not toolchain.gxx_accepts("gnu++23"):
        pytest.skip("this g++ has no -std=gnu++23")
    compiler = language(lang)
    assert compiler.compile is not None and "-march=native" in compiler.compile
    assert "-I/usr/include/eigen3" in compiler.compile and compiler.compile[-2:] == ("-lgmpxx", "-lgmp")
    runner = SandboxRunner()
    inputs = case_inputs(runner, problem, [0, 1], input_cache)
    ev = Judge(runner, problem, compiler).evaluate(LIBRARIES_CPP, inputs, "public", False, tmp_path / "w")
    assert ev.judge_result is JudgeResult.ACCEPTED, (ev.compile_message, [c.message for c in ev.cases])
    trivial = Judge(runner, problem, language("python")).evaluate(
        (Path(__file__).parents[1] / "src/cmx_alebench/solutions/trivial.py").read_text(), inputs, "public", False,
        tmp_path / "t")
    assert ev.absolute_score == trivial.absolute_score > 0      # the same depots as the trivial solution


def test_a_cpp23_solution_with_the_atcoder_library_boost_eigen_and_gmp_is_accepted(
        libraries_installed: None, problem: Problem, input_cache: Path, tmp_path: Path) -> None:
    """ALE-Bench's judge as a whole: the AtCoder Library at its path and Debian's Boost, Eigen
    and GMP in one C++23 solution, judged in the sandbox."""
    if _installed_atcoder() != "/opt/ac-library":
        pytest.skip("this machine holds no AtCoder Library at /opt/ac-library (ALE-Bench's path)")
    if not toolchain.gxx_accepts("gnu++23"):
        pytest.skip("this g++ has no -std=gnu++23")
    code = LIBRARIES_CPP.replace("#include <iostream>", "#include <atcoder/dsu>\n#include <iostream>").replace(
        "    if (demand <= 0) return 1;",
        "    atcoder::dsu groups(k);\n    for (int i = 1; i < k; ++i) groups.merge(0, i);\n"
        "    if (demand <= 0 || groups.size(0) != k) return 1;")
    runner = SandboxRunner()
    inputs = case_inputs(runner, problem, [0, 1], input_cache)
    ev = Judge(runner, problem, language("cpp23")).evaluate(code, inputs, "public", False, tmp_path / "w")
    assert ev.judge_result is JudgeResult.ACCEPTED, (ev.compile_message, [c.message for c in ev.cases])


def test_every_result_records_the_toolchain(libraries_installed: None, tmp_path: Path) -> None:
    code = tmp_path / "main.cpp"
    code.write_text(LIBRARIES_CPP)
    env = {**os.environ, "CMX_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "run", "recipe", "--tags=ale-bench,public-eval",
                           "--problem=cmx001", f"--code={code}", "--language=cpp20", "--json"], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    recorded = doc["ale_bench"]["toolchain"]
    assert recorded == json.loads(json.dumps(toolchain.libraries()))
    assert doc["metrics"]["accepted_cases"]["value"] == 5


def test_the_judge_image_template_holds_the_same_libraries() -> None:
    """containers/ale-bench-judge installs the Debian packages the toolchain reads, and says the
    AtCoder Library is not packaged."""
    import yaml

    root = Path(__file__).resolve().parents[3] / "containers" / "ale-bench-judge"
    meta = yaml.safe_load((root / "template.yaml").read_text())
    packages = set(meta["params"]["apt_packages"])
    assert {"g++-12", "libboost-dev", "libgmp-dev", "libeigen3-dev", "rustc", "python3-numpy"} <= packages
    assert meta["params"]["libraries"] == ["boost", "gmp", "eigen"] and set(meta["params"]["libraries"]) <= set(
        toolchain.libraries())
    assert meta["params"]["not_packaged"] == ["atcoder-library"]
    dockerfile = (root / "Dockerfile.j2").read_text()
    assert "AtCoder Library is not packaged" in dockerfile and "atcoder-library=not packaged" in dockerfile
    # AtCoder's crates that Debian packages, built in the image where the judge reads them
    assert meta["params"]["rust_crates"] == list(BOOKWORM_PACKAGED) and meta["params"]["crates_dir"] == IMAGE_CRATES
    assert {"cargo", *(debian_package(c) for c in BOOKWORM_PACKAGED), *DEFAULT_FEATURE_PACKAGES} <= packages
    assert "cargo build --release --offline" in dockerfile and "cargo-messages.json" in dockerfile
    assert re.search(r"include \"_apt.j2\"", dockerfile)          # the pinned apt closure (apt.lock) installs them


def test_the_judge_image_template_renders_with_every_package_pinned(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """cmx-docker renders the template (strict undefined) with its recorded apt.lock: each
    toolchain package is installed at a pinned version."""
    pytest.importorskip("cmx_docker")
    from cmx_docker.context import image_spec
    from cmx_docker.digests import DigestMemo

    monkeypatch.setenv("CMX_HOME", str(tmp_path))
    spec = image_spec("ale-bench-judge", None, DigestMemo(None))
    for package in ("g++-12", "libboost-dev", "libgmp-dev", "libeigen3-dev", "rustc", "python3-numpy"):
        assert re.search(rf"'{re.escape(package)}=[^']+'", spec.dockerfile), package
    assert "/etc/ale-bench-judge-libraries.txt" in spec.dockerfile


def test_boost_eigen_solution_is_accepted_with_the_judge_image(judge_image: str, problem: Problem,
                                                               input_cache: Path, tmp_path: Path) -> None:
    """The docker judge on the ale-bench-judge image's own /usr (not the host's): compile with
    its g++ 12, Boost, Eigen and GMP, run, test. The image is the one CMX_ALEBENCH_JUDGE_IMAGE
    names (built by cmx-docker: ensure_image('ale-bench-judge')), on the engine DOCKER_HOST names."""
    from cmx_alebench.docker_runner import DockerRunner

    image = judge_image

    runner = DockerRunner(image=str(image), host_usr=False)
    libraries = runner.client.containers.run(str(image), ["cat", "/etc/ale-bench-judge-libraries.txt"],
                                             network_mode="none", remove=True).decode()
    assert "atcoder-library=not packaged" in libraries and re.search(r"^boost=1\.\d+$", libraries, re.M)
    inputs = case_inputs(SandboxRunner(), problem, [0, 1], input_cache)
    for lang in ("cpp20", "cpp23"):
        ev = Judge(runner, problem, language(lang)).evaluate(LIBRARIES_CPP, inputs, "public", False, tmp_path / lang)
        assert ev.judge_result is JudgeResult.ACCEPTED, (lang, ev.compile_message, [c.message for c in ev.cases])
        assert ev.absolute_score > 0
