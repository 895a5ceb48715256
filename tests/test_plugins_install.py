"""Real pip installs into a throwaway environment: install/uninstall, broken and
incompatible plugins. The environment sees this one's packages (cmx-core, pip) through a
.pth file, so only the throwaway plugins are installed (seconds, offline but for the
build backend, which pip takes from its cache)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cmx_core.testing import IsolatedEnv
from cmx_core.testing import write_plugin_package as write_plugin

pytestmark = pytest.mark.slow

CLI = "import sys; from cmx_core.cli.main import main; sys.exit(main())"


GOOD = """\
    from pathlib import Path
    from cmx_core.api import StepType, hookimpl

    @hookimpl
    def cmx_register_steps(register):
        register(StepType(name="thrown.say", summary="say", run=lambda ctx: {"said": ctx.params["text"]}))

    @hookimpl
    def cmx_recipe_paths():
        return [Path(__file__).parent / "recipes"]
"""

RECIPE = """\
name: thrown-say
tags: [thrown, say]
summary: say something
inputs:
  text: {type: string, default: hello}
steps:
  - uses: thrown.say
    with: {text: "{{ inputs.text }}"}
outputs:
  said: {}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> IsolatedEnv:
    return IsolatedEnv.create(tmp_path_factory.mktemp("env") / "venv", inherit=True)


def cmx(env: IsolatedEnv, home: Path, *args: str, registry: Path | None = None):
    extra = {"CMX_HOME": str(home)}
    if registry is not None:
        extra["CMX_REGISTRY"] = str(registry)
    return env.run_python(["-c", CLI, *args], env=extra, check=False, timeout_s=600)


def _listed(env: IsolatedEnv, home: Path) -> dict[str, dict]:
    done = cmx(env, home, "plugins", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {p["name"]: p for p in json.loads(done.stdout)["plugins"]}


def test_install_use_uninstall_from_a_registry_path_source(env: IsolatedEnv, tmp_path: Path) -> None:
    src = write_plugin(tmp_path / "checkout" / "plugins", "thrown", module=GOOD)
    (src / "src" / "cmx_thrown" / "recipes" / "say.yaml").write_text(RECIPE, encoding="utf-8")
    registry = tmp_path / "checkout" / "registry.yaml"
    registry.write_text(textwrap.dedent("""\
        schema_version: 1
        plugins:
          - name: cmx-thrown
            distribution: cmx-thrown
            summary: a throwaway plugin
            source: {path: plugins/cmx-thrown}
            provides: {steps: [thrown.say], recipes: ["thrown,say"]}
            cmx_core: ">=0.1,<0.2"
            state: incubating
            license: MIT
            maintainers: [{name: t}]
        """), encoding="utf-8")
    home = tmp_path / "home"
    assert "thrown" not in _listed(env, home)

    done = cmx(env, home, "plugins", "install", "cmx-thrown", "--json", registry=registry)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["command"][-1] == str(src)
    assert {p["name"]: p["version"] for p in doc["plugins"]}["thrown"] == "0.3.0"

    done = cmx(env, home, "run", "recipe", "--tags=thrown,say", "--text=ciao", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"]["said"] == "ciao"

    done = cmx(env, home, "registry", "check", "--json", registry=registry)
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["installed_checked"] == 1

    done = cmx(env, home, "plugins", "uninstall", "cmx-thrown", registry=registry)
    assert done.returncode == 0, done.stderr
    assert "thrown" not in _listed(env, home)
    done = cmx(env, home, "run", "recipe", "--tags=thrown,say")
    assert done.returncode == 2


def test_a_plugin_whose_import_fails_is_reported_and_the_cli_works(
    env: IsolatedEnv, tmp_path: Path
) -> None:
    src = write_plugin(tmp_path, "broken", module="import no_such_module_anywhere\n")
    env.pip("install", "--no-deps", "--quiet", str(src))
    home = tmp_path / "home"
    try:
        info = _listed(env, home)["broken"]
        assert info["error"] == "ModuleNotFoundError: No module named 'no_such_module_anywhere'"
        assert info["distribution"] == "cmx-broken" and info["version"] == "0.3.0"
        done = cmx(env, home, "run", "recipe", "--tags=detect,os", "--json")
        assert done.returncode == 0, done.stderr
        done = cmx(env, home, "plugins", "list", "--strict-plugins")
        assert done.returncode == 2
        assert "plugin failed to load (strict plugin mode): 'broken': ModuleNotFoundError" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        env.pip("uninstall", "-y", "cmx-broken")


def test_a_plugin_requiring_another_cmx_core_is_refused_with_both_versions(
    env: IsolatedEnv, tmp_path: Path
) -> None:
    src = write_plugin(tmp_path, "future", module=GOOD.replace("thrown", "future"), core=">=9")
    env.pip("install", "--no-deps", "--quiet", str(src))
    home = tmp_path / "home"
    try:
        listed = _listed(env, home)
        assert listed["future"]["error"] == (
            "PluginError: needs cmx-core>=9, but cmx-core 0.1.0 is installed")
        assert listed["future"]["provides"] == {}
        assert listed["cmx-core"]["error"] is None
    finally:
        env.pip("uninstall", "-y", "cmx-future")
