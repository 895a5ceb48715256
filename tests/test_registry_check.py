"""`cmx registry check`: entries of installed plugins vs what those plugins really register."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from cmx_core.api import Detector, StepType, hookimpl
from cmx_core.cli.main import main
from cmx_core.cli.registry_cmd import check_registry
from cmx_core.plugins import loader as plugins
from cmx_core.plugins.registry_check import check_installed
from cmx_core.plugins.registry_yaml import read_registry

ENTRY = """\
schema_version: 1
plugins:
  - name: cmx-fake
    distribution: cmx-fake
    summary: a plugin registered in-process
    source: {index: cmx-fake}
    provides:
      steps: [fake.one]
      detectors: [fake_fact]
      recipes: ["fake,*"]
    cmx_core: ">=0.1,<0.2"
    state: incubating
    license: MIT
    maintainers: [{name: Tess}]
"""


def _plugin(recipes: Path, steps: tuple[str, ...] = ("fake.one",)) -> SimpleNamespace:
    @hookimpl
    def cmx_register_steps(register: Callable[[StepType], None]) -> None:
        for name in steps:
            register(StepType(name=name, summary="fake", run=lambda ctx: {}))

    @hookimpl
    def cmx_register_detectors(register: Callable[[Detector], None]) -> None:
        register(Detector(name="fake_fact", summary="fake", detect=lambda: 1))

    @hookimpl
    def cmx_recipe_paths() -> list[Path]:
        return [recipes]

    return SimpleNamespace(cmx_register_steps=cmx_register_steps,
                           cmx_register_detectors=cmx_register_detectors,
                           cmx_recipe_paths=cmx_recipe_paths)


def _recipe(directory: Path, name: str, tags: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(
        f"name: {name}\ntags: [{tags}]\nsummary: s\nsteps:\n  - uses: fake.one\n",
        encoding="utf-8")


@pytest.fixture
def setup(tmp_path: Path, cmx_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    path = tmp_path / "registry.yaml"

    def make(entry: str = ENTRY, steps: tuple[str, ...] = ("fake.one",), tags: str = "fake,demo"):
        path.write_text(entry, encoding="utf-8")
        recipes = tmp_path / "recipes"
        _recipe(recipes, "fake-demo", tags)
        loaded = plugins.load_registry(extra=[("cmx-fake", _plugin(recipes, steps))])
        monkeypatch.setattr(plugins, "_REGISTRY", loaded)
        return [str(p) for p in check_installed(read_registry(path), loaded)[0]]

    return make


def test_true_claims_pass(setup) -> None:
    assert setup() == []


def test_an_entry_claiming_a_step_the_plugin_lacks(setup) -> None:
    problems = setup(ENTRY.replace("steps: [fake.one]", "steps: [fake.one, fake.two]"))
    assert problems == [
        f"{Path(problems[0].split(':')[0])}: entry 'cmx-fake' key 'provides.steps': "
        + "claims 'fake.two' but cmx-fake 0 does not register it"]


def test_a_registered_step_the_entry_omits(setup) -> None:
    problems = setup(steps=("fake.one", "fake.extra"))
    assert len(problems) == 1
    assert "registers 'fake.extra', which the entry does not list" in problems[0]


def test_recipe_patterns_must_match_both_ways(setup) -> None:
    problems = setup(tags="other,demo")
    assert any("no recipe of cmx-fake matches 'fake,*'" in p for p in problems), problems
    assert any("recipe fake-demo.yaml (tags other,demo) matches none" in p for p in problems)


def test_a_plugin_that_fails_to_load_is_a_problem(setup, tmp_path: Path, monkeypatch) -> None:
    @hookimpl
    def cmx_register_steps(register):
        raise RuntimeError("boom while registering")

    (tmp_path / "registry.yaml").write_text(ENTRY, encoding="utf-8")
    loaded = plugins.load_registry(extra=[("cmx-fake", SimpleNamespace(
        cmx_register_steps=cmx_register_steps))])
    problems = [str(p) for p in check_installed(read_registry(tmp_path / "registry.yaml"), loaded)[0]]
    assert any("installed plugin fails to load: cmx-fake: RuntimeError: boom while registering"
               in p for p in problems), problems


def test_cli_exit_codes_and_json(setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup()
    assert main(["registry", "check", "--file", str(tmp_path / "registry.yaml")]) == 0
    assert "1 entries, 1 installed and compared: ok" in capsys.readouterr().out
    setup(ENTRY.replace("steps: [fake.one]", "steps: [fake.nope]"))
    assert main(["registry", "check", "--json", "--file", str(tmp_path / "registry.yaml")]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["installed_checked"] == 1
    assert {(p["entry"], p["key"]) for p in report["problems"]} == {
        ("cmx-fake", "provides.steps")}


def test_cli_reports_schema_errors_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text(ENTRY.replace("state: incubating", "state: gamma"), encoding="utf-8")
    assert main(["registry", "check", "--file", str(path), "--no-installed"]) == 2
    out = capsys.readouterr().out
    assert f"{path}:12: entry 'cmx-fake' key 'state': 'gamma' is not one of" in out


def test_missing_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry"]) == 2
    assert "cmx: error:" in capsys.readouterr().err


def test_the_repository_registry_is_green_for_what_is_installed(cmx_home: Path) -> None:
    """`cmx registry check` in this environment: every installed in-tree plugin's entry is true."""
    plugins.reset_registry()
    report = check_registry()
    assert report.ok, "\n".join(map(str, report.problems))
    assert report.installed_checked >= 1
