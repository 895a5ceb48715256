"""`cmx plugins install ./PATH` (a plugin's source directory), its offline build options, a
failed pip run reported in one line, and the `cmx plugins new --suite` scaffold."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from cmx_core.cli.main import main
from cmx_core.plugins import loader as plugins
from cmx_core.plugins import local_source
from cmx_core.plugins.pip_run import failure_cause
from cmx_core.recipes.load import load_recipe_file
from cmx_core.testing.readme import provides_lines, readme_problems

PYPROJECT = """[build-system]
requires = ["hatchling>=1.20"]
build-backend = "hatchling.build"

[project]
name = "cmx-local"
version = "0.1.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["src/{package}"]
{extra}"""


@pytest.fixture(autouse=True)
def _fresh_registry(cmx_home: Path):
    plugins.reset_registry()
    yield
    plugins.reset_registry()


def _project(tmp_path: Path, *, package: str = "cmx_local", extra: str = "", requires: str = "") -> Path:
    root = tmp_path / "cmx-local"
    (root / "src" / "cmx_local").mkdir(parents=True)
    (root / "src" / "cmx_local" / "__init__.py").write_text("")
    text = PYPROJECT.format(package=package, extra=extra)
    if requires:
        text = text.replace('requires = ["hatchling>=1.20"]', f"requires = [{requires!r}]")
    (root / "pyproject.toml").write_text(text)
    return root


def _dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    code = main(["plugins", "install", *argv, "--dry-run", "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_a_local_directory_installs_with_no_build_isolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, extra='dev-mode-dirs = ["src"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    code, doc, _ = _dry_run(capsys, "./cmx-local")
    assert code == 0 and doc is not None
    assert doc["command"] == [sys.executable, "-m", "pip", "install", "--no-build-isolation",
                              "--disable-pip-version-check", str(root)]
    code, doc, _ = _dry_run(capsys, "./cmx-local[test]", "--editable")
    assert doc is not None and doc["command"][-2:] == ["--editable", f"{root}[test]"]


def test_a_path_and_a_registry_name_install_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    code, doc, _ = _dry_run(capsys, "cmx-textstats", str(root))
    assert code == 0 and doc is not None
    assert doc["command"].count("--no-build-isolation") == 1
    assert doc["command"][-1] == str(root) and any("textstats" in word for word in doc["command"])


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: tmp / "nowhere", "no such directory"),
    (lambda tmp: tmp, "no pyproject.toml there"),
])
def test_a_path_that_is_no_project_is_one_line_exit_2(make, message: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _dry_run(capsys, str(make(tmp_path)))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_missing_backend_offline_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, requires="no-such-backend-cmx>=1")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    code, _, err = _dry_run(capsys, str(root))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "its build backend needs no-such-backend-cmx>=1, which is not installed here" in err
    monkeypatch.delenv("PIP_NO_INDEX")  # with an index, pip's build isolation fetches it
    code, doc, _ = _dry_run(capsys, str(root))
    assert code == 0 and doc is not None and "--no-build-isolation" not in doc["command"]


def test_an_editable_hatchling_build_that_needs_editables_says_how_to_avoid_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = local_source.module_available
    monkeypatch.setattr(local_source, "module_available", lambda name: name != "editables" and real(name))
    root = _project(tmp_path)
    code, _, err = _dry_run(capsys, str(root), "--editable")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "hatchling's editable install needs the 'editables' package" in err and "dev-mode-dirs" in err
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + 'dev-mode-dirs = ["src"]\n')
    code, doc, _ = _dry_run(capsys, str(root), "--editable")
    assert code == 0 and doc is not None and "--no-build-isolation" in doc["command"]


def test_a_failed_build_is_one_line_naming_the_cause_and_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    pyproject = root / "pyproject.toml"  # a dynamic version with no source: hatchling raises, in a traceback
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'dynamic = ["version"]'))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert main(["plugins", "install", str(root)]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("cmx: error:")]
    assert len(errors) == 1 and "Traceback" not in err and "Processing " in err  # pip's progress, one line
    assert errors[0].startswith("cmx: error: pip exited 1: ")
    assert "the build failed with ValueError: Missing `tool.hatch.version` configuration" in errors[0]
    log = Path(errors[0].split("the full output is in ", 1)[1].split(" ", 1)[0])
    assert "Traceback" in log.read_text() and str(root) in log.read_text()
    assert importlib.util.find_spec("cmx_local") is None  # nothing was installed


def test_failure_cause_prefers_a_missing_module_then_pips_error() -> None:
    assert "'editables'" in failure_cause(["Traceback", "  ModuleNotFoundError: No module named 'editables'",
                                           "ERROR: metadata-generation-failed"])
    assert failure_cause(["  File x", "      ValueError: bad version", "hint: See above"]) == \
        "the build failed with ValueError: bad version"
    assert failure_cause(["Processing x", "ERROR: No matching distribution found for y."]) == \
        "No matching distribution found for y"


# --------------------------------------------------------------------------- new --suite


def test_new_suite_scaffolds_a_measuring_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "new", "acme-bench", "--suite", "--dir", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    target = tmp_path / "cmx-acme-bench"
    assert sorted(doc["files"]) == [
        "README.md", "pyproject.toml", "src/cmx_acme_bench/__init__.py", "src/cmx_acme_bench/measure.py",
        "src/cmx_acme_bench/plugin.py", "src/cmx_acme_bench/recipes/acme-bench-measure.yaml",
        "tests/test_acme_bench_conformance.py", "tests/test_acme_bench_measure.py"]
    recipe = load_recipe_file(target / "src/cmx_acme_bench/recipes/acme-bench-measure.yaml")
    assert [(s.uses, s.measures) for s in recipe.steps] == [("acme-bench.measure", True)]
    assert 'dev-mode-dirs = ["src"]' in (target / "pyproject.toml").read_text()


def test_the_suite_scaffold_registers_its_suite_and_its_readme_is_current(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cmx_step_context) -> None:
    assert main(["plugins", "new", "acme-bench", "--suite", "--dir", str(tmp_path)]) == 0
    target = tmp_path / "cmx-acme-bench"
    monkeypatch.syspath_prepend(str(target / "src"))
    module = importlib.import_module("cmx_acme_bench.plugin")
    registry = plugins.load_registry(extra=[("acme-bench", module)])
    assert registry.suites["acme-bench"].section == "acme_bench"
    assert provides_lines("acme-bench", registry) == [
        "- recipes: acme-bench-measure", "- steps: acme-bench.measure", "- suites: acme-bench"]
    readme = target / "README.md"
    assert readme_problems("acme-bench", readme, registry) == []
    readme.write_text(readme.read_text().replace("acme-bench-measure", "acme-bench-old"))
    problems = readme_problems("acme-bench", readme, registry)
    assert len(problems) == 1 and "stale; replace it with:" in problems[0] and "acme-bench-measure" in problems[0]
    measure = importlib.import_module("cmx_acme_bench.measure")
    out = measure.run(cmx_step_context(params={"size": 50, "repeats": 2}))
    assert out.result.status == "valid" and out.result.metrics["items_per_second"].unit == "items/s"
    for name in ("cmx_acme_bench.measure", "cmx_acme_bench.plugin", "cmx_acme_bench"):
        sys.modules.pop(name, None)


# --------------------------------------------------------------------------- in-tree --editable


def test_an_in_tree_editable_install_offline_builds_here_or_names_the_fix(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = local_source.module_available
    monkeypatch.setattr(local_source, "module_available", lambda name: name != "editables" and real(name))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    code, doc, _ = _dry_run(capsys, "cmx-textstats", "--editable")  # dev-mode-dirs: a plain .pth
    assert code == 0 and doc is not None and "--no-build-isolation" in doc["command"]
    code, _, err = _dry_run(capsys, "cmx-mlperf", "--editable")  # hatchling's editables mode
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'editables' package" in err
    monkeypatch.delenv("PIP_NO_INDEX")  # with an index, pip's isolated build fetches editables
    code, doc, _ = _dry_run(capsys, "cmx-mlperf", "--editable")
    assert code == 0 and doc is not None and "--no-build-isolation" not in doc["command"]


def test_the_hello_scaffolds_readme_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["plugins", "new", "acme-hi", "--dir", str(tmp_path)]) == 0
    target = tmp_path / "cmx-acme-hi"
    monkeypatch.syspath_prepend(str(target / "src"))
    registry = plugins.load_registry(extra=[("acme-hi", importlib.import_module("cmx_acme_hi.plugin"))])
    assert readme_problems("acme-hi", target / "README.md", registry) == []
    assert "readme_problems(\"acme-hi\"" in (target / "tests" / "test_acme_hi_hello.py").read_text()
    for name in ("cmx_acme_hi.plugin", "cmx_acme_hi"):
        sys.modules.pop(name, None)


# --------------------------------------------------------------------------- keeping an editable install


def test_reinstalling_an_editable_plugin_keeps_it_editable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """#50 item 5: ``plugins install PATH`` without ``--editable`` replaced an editable install
    of the same plugin with a copy; now it stays editable, said on stderr, unless
    ``--no-editable``."""
    from cmx_core.plugins import install

    root = _project(tmp_path, extra='dev-mode-dirs = ["src"]\n')
    monkeypatch.setattr(install, "editable_installs", lambda: {root.resolve()})
    code, doc, err = _dry_run(capsys, str(root))
    assert code == 0 and doc is not None and doc["command"][-2:] == ["--editable", str(root)]
    assert f"{root} is installed editable; keeping it editable (--no-editable replaces it)" in err
    code, doc, err = _dry_run(capsys, str(root), "--no-editable")
    assert code == 0 and doc is not None and "--editable" not in doc["command"] and "keeping" not in err
    monkeypatch.setattr(install, "editable_installs", lambda: set())
    code, doc, _ = _dry_run(capsys, str(root))
    assert code == 0 and doc is not None and "--editable" not in doc["command"]


def test_the_editable_installs_are_read_from_the_environment() -> None:
    """PEP 610's ``direct_url.json`` of this environment: the checkout's own install
    (scripts/install.sh installs cmx-core editable) is among them."""
    from cmx_core.plugins.install import editable_installs

    assert Path(__file__).resolve().parents[1] in editable_installs()


def test_a_wheelhouse_needs_a_checkout_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cmx plugins wheelhouse`` builds cmx-core's wheel from the checkout it runs from; run
    from an installed wheel, it says which cmx to use instead (one line, nothing written)."""
    import cmx_core
    from cmx_core.errors import UsageError
    from cmx_core.plugins import wheelhouse

    installed = tmp_path / "site-packages" / "cmx_core" / "__init__.py"
    installed.parent.mkdir(parents=True)
    monkeypatch.setattr(cmx_core, "__file__", str(installed))
    with pytest.raises(UsageError, match=r"not from a checkout .* run it with the cmx of a checkout"):
        wheelhouse.build(tmp_path / "wheels", (), lambda command: None)
    assert not (tmp_path / "wheels").exists()


def test_project_name_reads_the_project_table_only(tmp_path: Path) -> None:
    """``api.project_name``, shared by the wheelhouse and cmx-docker's build context: the
    ``[project]`` table's name, not a ``name`` key of another table before it."""
    from cmx_core import api

    (tmp_path / "pyproject.toml").write_text('[tool.other]\nname = "not-this"\n\n[project]\n'
                                             'version = "1"\nname = "cmx-acme"  # the distribution\n')
    assert api.project_name(tmp_path) == "cmx-acme"
    assert api.project_name(tmp_path / "missing") is None
    assert api.project_name(Path(__file__).resolve().parents[1]) == "cmx-core"
