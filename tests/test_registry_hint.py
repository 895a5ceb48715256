"""The missing-plugin error: a step type nobody provides names its registry plugin and command."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core import api
from cmx_core.cli.main import main
from cmx_core.errors import PluginError
from cmx_core.plugins import loader as plugins
from cmx_core.plugins.registry_yaml import install_hint

RECIPE = """\
name: needs-loadgen
tags: [needs, loadgen]
summary: a recipe whose step type comes from cmx-mlperf
steps:
  - uses: mlperf.loadgen
    with: {sut: noop}
"""


@pytest.fixture
def no_plugins(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    plugins.reset_registry()
    yield
    plugins.reset_registry()


@pytest.mark.parametrize(
    ("kind", "name", "plugin"),
    [
        ("step type", "mlperf.loadgen", "cmx-mlperf"),
        ("step type", "docker.build", "cmx-docker"),
        ("executor", "docker", "cmx-docker"),
        ("detector", "gpus", "cmx-detect"),
        ("command", "detect", "cmx-detect"),
        ("exporter", "summary-csv", "cmx-mlperf"),
        ("recipe", "mlperf,inference,resnet50", "cmx-mlperf"),
        ("step type", "textstats.count", "cmx-textstats"),
    ],
)
def test_install_hint_names_the_plugin_and_command(kind: str, name: str, plugin: str) -> None:
    assert install_hint(kind, name) == f"plugin {plugin} provides it: cmx plugins install {plugin}"


def test_nothing_known_gives_no_hint() -> None:
    assert install_hint("step type", "nobody.has.this") == ""
    assert install_hint("recipe", "no,such,tags") == ""


def test_a_broken_registry_never_hides_the_original_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "registry.yaml"
    bad.write_text("plugins: [ {name: x", encoding="utf-8")
    monkeypatch.setenv("CMX_REGISTRY", str(bad))
    assert install_hint("step type", "mlperf.loadgen") == ""
    monkeypatch.setenv("CMX_REGISTRY", str(tmp_path / "gone.yaml"))
    assert install_hint("step type", "mlperf.loadgen") == ""


def test_deprecated_entries_yield_to_their_replacement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = ("  - {{name: {n}, distribution: {n}, summary: s, source: {{index: {n}}}, "
             "provides: {{steps: [a.b]}}, cmx_core: '>=0.1', state: {s}, license: MIT, "
             "maintainers: [{{name: m}}]{extra}}}\n")
    text = "schema_version: 1\nplugins:\n" + entry.format(
        n="cmx-old", s="deprecated", extra=", deprecated_by: cmx-new") + entry.format(
        n="cmx-new", s="stable", extra="")
    (tmp_path / "r.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("CMX_REGISTRY", str(tmp_path / "r.yaml"))
    assert install_hint("step", "a.b") == "plugin cmx-new provides it: cmx plugins install cmx-new"


def test_registry_step_lookup_error_names_plugin_and_command(no_plugins: None) -> None:
    registry = plugins.get_registry()
    with pytest.raises(PluginError) as err:
        registry.step("mlperf.loadgen")
    assert str(err.value) == (
        "no loaded plugin provides step type 'mlperf.loadgen'; "
        "plugin cmx-mlperf provides it: cmx plugins install cmx-mlperf")


def test_plan_of_a_recipe_with_a_missing_step_type(no_plugins: None, tmp_path: Path) -> None:
    (tmp_path / "needs-loadgen.yaml").write_text(RECIPE, encoding="utf-8")
    with pytest.raises(PluginError, match=r"step type 'mlperf.loadgen'.*cmx plugins install cmx-mlperf"):
        api.plan("needs,loadgen", recipes_dirs=[tmp_path])


def test_cli_run_exits_2_with_one_line(
    no_plugins: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "needs-loadgen.yaml").write_text(RECIPE, encoding="utf-8")
    code = main(["run", "recipe", "--tags=needs,loadgen", "--recipes", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "mlperf.loadgen" in err and "cmx plugins install cmx-mlperf" in err


def test_cli_unknown_executor_names_its_plugin(
    no_plugins: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "recipe", "--tags=detect,os", "--executor", "docker"])
    err = capsys.readouterr().err
    assert code == 2
    assert "executor 'docker'" in err and "cmx plugins install cmx-docker" in err
