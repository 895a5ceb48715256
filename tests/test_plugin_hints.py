"""The missing plugin is named for a recipe query (from the registry's recipe tags), and a
step type's missing extra is named at plan time with the command that installs it."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cmx_core.api import StepType, hookimpl
from cmx_core.errors import UsageError
from cmx_core.plugins import loader as plugins
from cmx_core.plugins.extras import missing_module_hint, missing_requirements, require_extra
from cmx_core.plugins.hints import missing_plugin_hint

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = """\
schema_version: 1
plugins:
  - {name: cmx-ghost, distribution: cmx-ghost, summary: s, source: {index: cmx-ghost}, cmx_core: ">=0.1,<0.2",
     provides: {recipes: ["ghost,bench,*"]}, state: stable, license: MIT, maintainers: [{name: m}]}
  - {name: cmx-docker, distribution: cmx-docker, summary: s, source: {index: cmx-docker}, cmx_core: ">=0.1,<0.2",
     provides: {recipes: ["build,image"]}, state: stable, license: MIT, maintainers: [{name: m}]}
"""


@pytest.fixture
def registry_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "registry.yaml"
    path.write_text(REGISTRY, encoding="utf-8")
    monkeypatch.setenv("CMX_REGISTRY", str(path))
    return path


def test_a_query_a_registry_plugin_would_answer_names_it_and_the_command(registry_file: Path) -> None:
    hint = missing_plugin_hint(["ghost", "bench", "h100"])  # h100: a variation tag of the recipe
    assert hint == "; plugin cmx-ghost provides recipes tagged ghost,bench,*: cmx plugins install cmx-ghost"
    assert shlex.split(hint.split(": ", 1)[1]) == ["cmx", "plugins", "install", "cmx-ghost"]


def test_no_hint_when_no_entry_matches_or_the_plugin_is_installed(registry_file: Path) -> None:
    assert missing_plugin_hint(["ghost"]) == ""  # the pattern needs bench as well
    assert missing_plugin_hint(["build", "image"]) == ""  # cmx-docker is installed here: no false advice


def test_an_installed_plugin_that_failed_to_load_is_named(registry_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = plugins.load_registry()
    info = registry.plugins["docker"]
    registry.plugins["docker"] = plugins.PluginInfo(info.name, info.distribution, info.version, info.module,
                                                    error="ImportError: no docker module")
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    assert missing_plugin_hint(["build", "image"]) == (
        "; plugin cmx-docker provides recipes tagged build,image and is installed but failed to load: "
        "ImportError: no docker module (see `cmx plugins info docker`)")


def test_the_shipped_registry_names_cmx_mlperf_for_the_headline_query(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setenv("CMX_REGISTRY", str(ROOT / "registry.yaml"))
    from cmx_core.plugins import hints

    monkeypatch.setattr(hints, "installed_distributions", lambda: {})  # as with cmx-mlperf uninstalled
    assert missing_plugin_hint(["mlperf", "inference", "llama"]) == (
        "; plugin cmx-mlperf provides recipes tagged mlperf,inference,*: cmx plugins install cmx-mlperf")


# --------------------------------------------------------------------------- extras


@pytest.fixture
def extra_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """cmx-fakextra 1.0 as importlib.metadata sees it: extra 'llm' needs a package that is not
    installed and a packaging release that does not exist; extra 'ok' needs only pyyaml."""
    info = tmp_path / "site" / "cmx_fakextra-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cmx-fakextra\nVersion: 1.0\nRequires-Dist: cmx-core>=0.1,<0.2\n"
        "Provides-Extra: llm\nRequires-Dist: cmx-no-such-package>=1; extra == \"llm\"\n"
        "Requires-Dist: packaging>=999; extra == \"llm\"\n"
        "Provides-Extra: ok\nRequires-Dist: pyyaml>=5; extra == \"ok\"\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return "cmx-fakextra"


def test_missing_requirements_of_an_extra(extra_dist: str) -> None:
    missing = missing_requirements(extra_dist, "llm")
    assert missing[0] == "cmx-no-such-package is not installed"
    assert missing[1].startswith("packaging ") and missing[1].endswith("is installed, packaging>=999 is needed")
    assert missing_requirements(extra_dist, "ok") == []
    with pytest.raises(UsageError, match="cmx-fakextra has no extra 'gpu' \\(it has: llm, ok\\)"):
        missing_requirements(extra_dist, "gpu")


def test_require_extra_names_the_extra_and_a_pastable_command(extra_dist: str) -> None:
    with pytest.raises(UsageError) as caught:
        require_extra(extra_dist, "llm", "SUT 'hf-causal'")
    text = str(caught.value)
    assert text.startswith("SUT 'hf-causal' needs the extra 'llm' of cmx-fakextra (cmx-no-such-package is not")
    assert text.endswith(": cmx plugins install 'cmx-fakextra[llm]'")
    assert shlex.split(text.rsplit(": ", 1)[1]) == ["cmx", "plugins", "install", "cmx-fakextra[llm]"]


def test_the_plan_check_names_each_step_type_whose_extra_is_missing(extra_dist: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_core.run import engine

    @hookimpl
    def cmx_register_steps(register):  # type: ignore[no-untyped-def]
        register(StepType(name="fakextra.gen", summary="needs llm", run=lambda ctx: {}, extras=("llm",)))
        register(StepType(name="fakextra.fine", summary="needs ok", run=lambda ctx: {}, extras=("ok",)))

    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    registry = plugins.load_registry(extra=[("cmx-fakextra", SimpleNamespace(cmx_register_steps=cmx_register_steps))])
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    (tmp_path / "r.yaml").write_text("name: gen\ntags: [fake, gen]\nsummary: s\nsteps:\n  - uses: fakextra.fine\n"
                                     "  - uses: fakextra.gen\n  - uses: fakextra.gen\n", encoding="utf-8")
    with pytest.raises(UsageError) as raised:  # the plan itself is refused, before anything runs
        engine.plan("fake,gen", {}, recipes_dirs=[tmp_path])
    assert str(raised.value).startswith("step type 'fakextra.gen' (recipe gen) needs the extra 'llm' of cmx-fakextra")
    assert str(raised.value).endswith(": cmx plugins install 'cmx-fakextra[llm]'")  # one problem, no "and N more"


def test_extras_for_names_the_extra_a_literal_with_value_needs(extra_dist: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``StepType.extras_for``: the extras a step needs for what its ``with:`` selects (a SUT)."""
    from cmx_core.run import engine

    def needs(with_: Any) -> tuple[str, ...]:
        return ("llm",) if with_.get("sut") == "big" else ("ok",)

    @hookimpl
    def cmx_register_steps(register):  # type: ignore[no-untyped-def]
        register(StepType(name="fakextra.sut", summary="a SUT by name", run=lambda ctx: {}, extras_for=needs))

    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    registry = plugins.load_registry(extra=[("cmx-fakextra", SimpleNamespace(cmx_register_steps=cmx_register_steps))])
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    for name, sut in (("small", "small"), ("big", "big")):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\ntags: [fake, {name}]\nsummary: s\nsteps:\n"
                                               f"  - {{uses: fakextra.sut, with: {{sut: {sut}}}}}\n", encoding="utf-8")
    assert engine.plan("fake,small", {}, recipes_dirs=[tmp_path]).root.recipe.name == "small"  # 'ok' is installed
    with pytest.raises(UsageError, match=r"needs the extra 'llm' of cmx-fakextra .*'cmx-fakextra\[llm\]'$"):
        engine.plan("fake,big", {}, recipes_dirs=[tmp_path])


def test_a_missing_module_at_run_time_names_its_extra(extra_dist: str) -> None:
    # the error a step raises when the extra is missing: No module named 'cmx_no_such_package'
    assert missing_module_hint(extra_dist, "cmx_no_such_package.sub") == (
        "; it comes with the extra 'llm' of cmx-fakextra: cmx plugins install 'cmx-fakextra[llm]'")
    assert missing_module_hint(extra_dist, "yaml") == (  # the module of distribution pyyaml
        "; it comes with the extra 'ok' of cmx-fakextra: cmx plugins install 'cmx-fakextra[ok]'")
    assert missing_module_hint(extra_dist, "numpy") == ""
    assert missing_module_hint("cmx-not-installed", "x") == ""


def test_cmx_run_names_the_missing_plugin_end_to_end(registry_file: Path, cli: Any) -> None:
    result = cli("run", "--tags=ghost,bench")
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.startswith("cmx: error: no recipe has any of the tags 'ghost,bench'")
    assert "; plugin cmx-ghost provides recipes tagged ghost,bench,*: cmx plugins install cmx-ghost (see " in result.err


def test_a_turned_off_plugin_is_named_as_such(monkeypatch: pytest.MonkeyPatch, cli: Any) -> None:
    monkeypatch.setenv("CMX_REGISTRY", str(ROOT / "registry.yaml"))
    result = cli("run", "--tags=mlperf,inference,llama", "--disable-plugin", "mlperf")
    assert result.code == 2
    assert "plugin cmx-mlperf provides recipes tagged mlperf,inference,* and is installed but turned off " \
           "(CMX_DISABLE_PLUGINS or --disable-plugin names mlperf)" in result.err
