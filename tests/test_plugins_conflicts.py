"""Two plugins registering one name, bad hookimpls, plugins replacing core built-ins."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cmx_core import api
from cmx_core.api import Detector, StepType, hookimpl
from cmx_core.cli.main import main
from cmx_core.errors import PluginError
from cmx_core.plugins import loader as plugins


def _step_plugin(step: str) -> SimpleNamespace:
    @hookimpl
    def cmx_register_steps(register):
        register(StepType(name=step, summary="s", run=lambda ctx: {"who": step}))

    return SimpleNamespace(cmx_register_steps=cmx_register_steps)


@pytest.fixture
def install(cmx_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")

    def load(*extra: tuple[str, object]) -> plugins.Registry:
        registry = plugins.load_registry(extra=extra)
        monkeypatch.setattr(plugins, "_REGISTRY", registry)
        return registry

    return load


def test_same_step_type_from_two_plugins_names_both(install) -> None:
    registry = install(("acme", _step_plugin("x.run")), ("other", _step_plugin("x.run")))
    assert registry.conflicts == {"x.run": ("acme", "other")}
    assert "x.run" not in registry.steps
    with pytest.raises(PluginError) as err:
        registry.step("x.run")
    assert str(err.value) == (
        "step type 'x.run' is registered by both acme and other; uninstall one of them or "
        "limit loading with CMX_LOAD_PLUGINS")
    assert registry.plugins["acme"].error == "step 'x.run' is also registered by other"
    assert registry.plugins["other"].error == "step 'x.run' is also registered by acme"


def test_conflict_in_a_plan_and_in_plugins_list(
    install, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(("acme", _step_plugin("x.run")), ("other", _step_plugin("x.run")))
    (tmp_path / "r.yaml").write_text(
        "name: r\ntags: [r]\nsummary: s\nsteps:\n  - uses: x.run\n", encoding="utf-8")
    with pytest.raises(PluginError, match="registered by both acme and other"):
        api.plan("r", recipes_dirs=[tmp_path])
    assert main(["plugins", "list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["conflicts"] == {"x.run": ["acme", "other"]}
    assert main(["plugins"]) == 0
    assert "conflict: 'x.run' is registered by acme and other" in capsys.readouterr().out


def test_a_plugin_may_replace_a_core_detector(install) -> None:
    @hookimpl
    def cmx_register_detectors(register):
        register(Detector(name="os", summary="richer os", detect=lambda: {"name": "plan9"}))

    registry = install(("richer", SimpleNamespace(cmx_register_detectors=cmx_register_detectors)))
    assert registry.conflicts == {}
    assert registry.detectors["os"].plugin == "richer"
    assert registry.plugins["richer"].error is None


def test_an_unknown_hook_is_refused_naming_plugin_and_hook(install) -> None:
    @hookimpl
    def cmx_register_stepz(register):  # a typo: no such hookspec
        raise AssertionError("never called")

    registry = install(("typo", SimpleNamespace(cmx_register_stepz=cmx_register_stepz)),
                       ("fine", _step_plugin("fine.run")))
    error = registry.plugins["typo"].error
    assert error is not None and "unknown hook 'cmx_register_stepz'" in error
    assert "fine.run" in registry.steps  # the others keep working


def test_a_hookimpl_with_a_wrong_argument_is_refused(install) -> None:
    @hookimpl
    def cmx_register_steps(registr):  # wrong argument name
        raise AssertionError("never called")

    registry = install(("badargs", SimpleNamespace(cmx_register_steps=cmx_register_steps)))
    error = registry.plugins["badargs"].error
    assert error is not None
    assert "Plugin 'badargs' for hook 'cmx_register_steps'" in error
    assert {s.plugin for s in registry.steps.values()} == {"cmx-core"}


def test_strict_mode_turns_a_conflict_into_an_error(cmx_home: Path, monkeypatch) -> None:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    with pytest.raises(PluginError, match=r"^2 plugins failed to load \(strict plugin mode\): 'acme': .*; 'other': "):
        plugins.load_registry(strict=True, extra=[("acme", _step_plugin("x.run")),
                                                  ("other", _step_plugin("x.run"))])
