"""Registry CI: every in-tree plugin stands alone.

For each ``registry.yaml`` entry with an in-tree ``source.path`` (and for a plugin fresh from
``cmx plugins new``): build its wheel and cmx-core's, install both into a fresh virtual
environment that holds nothing else but pytest and pip (dependencies come from the package index through pip's
cache, under the project's ``constraints.txt``: its CPU torch, not the newest CUDA build), load
the plugin through its real entry point in strict mode, check its registry entry against what
it registers, and run the conformance kit — the generic checks, plus the
plugin's own ``tests/test_*conformance*.py`` when it has them (those run its steps on
samples). Takes minutes: marked ``slow``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmx_core.plugins.registry_yaml import read_registry
from cmx_core.testing import IsolatedEnv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "registry.yaml"
CONSTRAINTS = ROOT / "constraints.txt"
CLI = "import sys; from cmx_core.cli.main import main; sys.exit(main())"
SCAFFOLD = "ci-scaffold"


@dataclass(frozen=True)
class Case:
    name: str
    project: Path | None  # None: scaffold it with `cmx plugins new`
    requires: tuple[str, ...] = ()


def _cases() -> list[Case]:
    registry = read_registry(REGISTRY)
    cases = [Case(e.name, ROOT / e.source.path, e.requires_plugins)
             for e in registry.entries if e.source.path]
    return [*cases, Case(f"cmx-{SCAFFOLD}", None)]


def _build_wheel(project: Path, dest: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-q", "-w", str(dest), str(project)],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{project} does not build a wheel:\n{done.stderr[-3000:]}"
    wheels = sorted(dest.glob("*.whl"), key=lambda p: p.stat().st_mtime)
    return wheels[-1]


@pytest.fixture(scope="module")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(ROOT, tmp_path_factory.mktemp("core-wheel"))


def _project(case: Case, tmp_path: Path) -> Path:
    if case.project is not None:
        return case.project
    from cmx_core.cli.plugins_cmd import scaffold_plugin

    return scaffold_plugin(SCAFFOLD, tmp_path / "scaffold")


GENERIC = """\
from cmx_core.testing import PluginConformance


class TestRegistryCIConformance(PluginConformance):
    plugin = {plugin!r}
    requires_plugins = {requires!r}
    unsampled_steps = {unsampled!r}
    unrun_executors = {unrun!r}
"""


def _run(env: IsolatedEnv, args: list[str], home: Path, cwd: Path | None = None,
         timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    # CMX_SOURCE_DIR: cmx-docker builds images from wheels of a checkout, and a wheel-installed
    # cmx-core is no checkout; this one is.
    return env.run_python(args, env={"CMX_HOME": str(home), "CMX_REGISTRY": str(REGISTRY),
                                     "CMX_SOURCE_DIR": str(ROOT)},
                          cwd=cwd, check=False, timeout_s=timeout_s)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_plugin_stands_alone(case: Case, core_wheel: Path, tmp_path: Path) -> None:
    project = _project(case, tmp_path)
    wheels = [_build_wheel(project, tmp_path / "wheels")]
    wheels += [_build_wheel(ROOT / read_registry(REGISTRY).require(r).source.path,
                            tmp_path / "wheels") for r in case.requires]
    # made without ensurepip (seconds of CPU, 12 times): this interpreter's pip installs into it
    # (--python), and the environment then holds cmx-core, the plugin, their dependencies, pytest
    # and pip, which every venv python makes holds: cmx-docker builds an image's wheels and
    # resolves its lock with the pip of the environment it runs in, and declares no pip
    env = IsolatedEnv.create(tmp_path / "venv", with_pip=False)
    # --no-compile: the environment is used once, so Python compiles only what it imports
    # rather than every module of torch, ray and the kubernetes client at install
    env.pip("install", "-q", "--no-compile", "-c", str(CONSTRAINTS), str(core_wheel), *map(str, wheels),
            "pytest>=8", "pip")
    home = tmp_path / "home"

    # only cmx-core and this plugin (and what it says it requires) are installed
    probe = _run(env, ["-c", textwrap.dedent("""\
        import json
        from importlib.metadata import entry_points
        from cmx_core.plugins.loader import load_registry
        registry = load_registry(strict=True)
        print(json.dumps({
            "entry_points": sorted((e.name, e.dist.metadata["Name"]) for e in entry_points(group="cmx")),
            "provides": {n: i.provides for n, i in registry.plugins.items()},
        }))
        """)], home)
    assert probe.returncode == 0, f"{case.name} does not load on its own:\n{probe.stderr[-3000:]}"
    found = json.loads(probe.stdout)
    dists = {dist.replace("_", "-").lower() for _, dist in found["entry_points"]}
    assert dists == {case.name, *case.requires}, found["entry_points"]
    plugin = next(name for name, dist in found["entry_points"]
                  if dist.replace("_", "-").lower() == case.name)

    if case.project is not None:
        check = _run(env, ["-c", CLI, "registry", "check", "--json"], home)
        report = json.loads(check.stdout)
        assert check.returncode == 0, "\n".join(p["text"] for p in report["problems"])
        assert report["installed_checked"] == 1 + len(case.requires)

    tests = tmp_path / "conformance"
    tests.mkdir()
    steps = found["provides"][plugin].get("steps", [])
    (tests / "test_registry_ci_conformance.py").write_text(GENERIC.format(
        plugin=plugin, requires=tuple(r.removeprefix("cmx-") for r in case.requires),
        unsampled={s: "the plugin's own conformance tests run its steps" for s in steps},
        unrun={e: "the plugin's own conformance tests run its executors (a container engine, a cluster...)"
               for e in found["provides"][plugin].get("executors", [])}),
        encoding="utf-8")
    own = sorted((project / "tests").glob("test_*conformance*.py"))
    done = _run(env, ["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
                      "--import-mode=importlib", "--rootdir", str(tmp_path),
                      str(tests), *map(str, own)], home, cwd=tmp_path)
    assert done.returncode == 0, f"{case.name}: conformance failed\n{done.stdout[-5000:]}"
    assert " passed" in done.stdout and " failed" not in done.stdout

    _smoke(case, env, home, tmp_path)


def _smoke(case: Case, env: IsolatedEnv, home: Path, tmp_path: Path) -> None:
    """Use the worked example and the scaffold through a recipe, as a user would."""
    if case.name == "cmx-textstats":
        text = tmp_path / "poem.txt"
        text.write_text("so much depends\nupon\n", encoding="utf-8")
        done = _run(env, ["-c", CLI, "run", "recipe", "--tags=textstats,count",
                          f"--path={text}", "--json"], home)
        assert done.returncode == 0, done.stderr[-3000:]
        doc = json.loads(done.stdout)
        assert doc["outputs"] == {"lines": 2, "words": 4, "bytes": 21}
        assert doc["metrics"]["words"] == {"value": 4, "unit": "words", "higher_is_better": True}
    elif case.project is None:
        done = _run(env, ["-c", CLI, "run", "recipe", f"--tags={SCAFFOLD},hello", "--who=ci",
                          "--json"], home)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["outputs"] == {"greeting": "hello ci"}
