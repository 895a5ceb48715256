"""Suites as plugins: a plugin outside cmx-core (tests/suite_plugin, cmx-helm) registers the
suite ``helm`` with its own result section, runs end to end through ``cmx run`` and
``cmx results list/show/compare/export``; broken suites are refused naming the plugin."""

from __future__ import annotations

import csv
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cmx_core.api import Suite, hookimpl
from cmx_core.errors import ResultsError
from cmx_core.plugins import loader as plugins
from cmx_core.results.examples import example_document
from cmx_core.results.validate import validate_document

PLUGIN_DIR = Path(__file__).resolve().parent / "suite_plugin"


@pytest.fixture
def helm(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The cmx-helm plugin module, imported from tests/suite_plugin."""
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    sys.modules.pop("cmx_helm.plugin", None)
    return importlib.import_module("cmx_helm.plugin")


@pytest.fixture
def helm_registry(helm: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[plugins.Registry]:
    """cmx-core's built-ins and cmx-helm only, as the process-wide registry."""
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    registry = plugins.load_registry(extra=[("cmx-helm", helm)])
    assert registry.plugins["cmx-helm"].error is None, registry.plugins["cmx-helm"].error
    monkeypatch.setattr(plugins, "_REGISTRY", registry)
    yield registry


def _registry_with(monkeypatch: pytest.MonkeyPatch, *suites: tuple[str, list[Any]]) -> plugins.Registry:
    """Load plugins that each register the given suites (a plugin per (name, suites))."""
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    extra = []
    for name, provided in suites:
        class _Plugin:
            def __init__(self, provided: list[Any]) -> None:
                self.provided = provided

            @hookimpl
            def cmx_register_suites(self, register: Callable[[Suite], None]) -> None:
                for suite in self.provided:
                    register(suite)

        extra.append((name, _Plugin(provided)))
    return plugins.load_registry(extra=extra)


# -- registration ---------------------------------------------------------------------------


def test_the_plugin_registers_its_suite_next_to_the_core_custom_suite(helm_registry: plugins.Registry) -> None:
    suites = helm_registry.suites
    assert sorted(suites) == ["custom", "helm"]
    assert suites["helm"].plugin == "cmx-helm" and suites["helm"].section == "helm"
    assert suites["custom"].plugin == "cmx-core" and suites["custom"].section == ""
    assert helm_registry.plugins["cmx-helm"].provides["suites"] == ["helm"]


BROKEN = [
    ({"type": "object", "properties": {"scenario": {"type": "strng"}}}, "helm",
     ("cmx-helm: suite 'helm' section schema is invalid: 'strng' is not valid under any of the given "
      "schemas at $.properties.scenario.type")),
    ({"type": "object", "required": "scenario"}, "helm",
     "cmx-helm: suite 'helm' section schema is invalid: 'scenario' is not of type 'array' at $.required"),
    ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "helm",
     "cmx-helm: suite 'helm' section schema is invalid: $ref '#/$defs/missing' at $.properties.a does not resolve"),
    ({"type": "object"}, "metrics",
     "cmx-helm: suite 'helm' section 'metrics' is a key of the result envelope; pick another name"),
    ({"type": "object"}, "Helm Section",
     "cmx-helm: suite 'helm' section 'Helm Section' is not a lower-case identifier (a-z, 0-9, _)"),
]


@pytest.mark.parametrize(("schema", "section", "message"), BROKEN,
                         ids=["bad-type", "bad-required", "dangling-ref", "envelope-key", "bad-name"])
def test_a_broken_suite_is_refused_with_one_line_naming_the_plugin(
    monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any], section: str, message: str
) -> None:
    broken = Suite(name="helm", summary="broken", section=section, schema=schema)
    registry = _registry_with(monkeypatch, ("cmx-helm", [broken]))
    assert "helm" not in registry.suites
    error = registry.plugins["cmx-helm"].error
    assert error == f"PluginError: {message}"
    assert "\n" not in error


def test_a_broken_suite_fails_strict_loading(helm: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = replace(helm.SUITE, schema={"type": "strng"})
    monkeypatch.setattr(helm, "SUITE", broken)
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    with pytest.raises(plugins.PluginError, match=r"plugin failed to load \(strict plugin mode\): 'cmx-helm': "
                       r"PluginError: cmx-helm: suite 'helm' section schema is invalid: .* at \$\.type"):
        plugins.load_registry(strict=True, extra=[("cmx-helm", helm)])


def test_a_suite_name_registered_twice_names_both_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    one = Suite(name="helm", summary="a", section="helm", schema={"type": "object"})
    two = Suite(name="helm", summary="b", section="helm2", schema={"type": "object"})
    registry = _registry_with(monkeypatch, ("cmx-helm", [one]), ("cmx-helm-fork", [two]))
    assert "helm" not in registry.suites
    assert registry.plugins["cmx-helm"].error == "suite 'helm' is also registered by cmx-helm-fork"
    assert registry.plugins["cmx-helm-fork"].error == "suite 'helm' is also registered by cmx-helm"


def test_a_section_claimed_by_two_suites_names_both_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    one = Suite(name="helm", summary="a", section="helm", schema={"type": "object"})
    two = Suite(name="helm-lite", summary="b", section="helm", schema={"type": "object"})
    registry = _registry_with(monkeypatch, ("cmx-helm", [one]), ("cmx-helm-lite", [two]))
    assert "helm" not in registry.suites and "helm-lite" not in registry.suites
    assert registry.plugins["cmx-helm"].error == (
        "suite 'helm' claims result section 'helm', which suite 'helm-lite' of cmx-helm-lite also claims")
    assert registry.plugins["cmx-helm-lite"].error == (
        "suite 'helm-lite' claims result section 'helm', which suite 'helm' of cmx-helm also claims")


def test_registering_something_else_than_a_suite_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = _registry_with(monkeypatch, ("cmx-helm", [{"name": "helm"}]))
    assert sorted(registry.suites) == ["custom"]
    assert registry.plugins["cmx-helm"].error == (
        "PluginError: cmx-helm: cmx_register_suites registered a dict, not a Suite")


# -- validation with the plugin's section ---------------------------------------------------


def _helm_document(tmp_path: Path, helm: ModuleType, scenario: str = "mmlu") -> dict[str, Any]:
    from cmx_core.results.examples import example_document

    output = helm.evaluate(_context(tmp_path, scenario))
    return example_document(tmp_path, part=output.result)


def _context(tmp_path: Path, scenario: str) -> Any:
    from cmx_core.testing import make_step_context

    return make_step_context(tmp_path, params={"scenario": scenario})


def test_a_helm_document_is_valid_with_the_plugins_suites(tmp_path: Path, helm: ModuleType,
                                                          helm_registry: plugins.Registry) -> None:
    document = _helm_document(tmp_path, helm)
    validate_document(document, source="result.json", suites=helm_registry.suites)
    assert document["helm"]["instances"] == 4


def test_a_bad_section_names_the_suite_its_plugin_and_the_path(tmp_path: Path, helm: ModuleType,
                                                               helm_registry: plugins.Registry) -> None:
    document = _helm_document(tmp_path, helm, scenario="broken")
    with pytest.raises(ResultsError) as caught:
        validate_document(document, source="result.json", suites=helm_registry.suites)
    assert str(caught.value) == ("result.json: invalid result document: $.helm.scenario must be string "
                                 "(section of suite 'helm' from plugin cmx-helm)")
    document = _helm_document(tmp_path, helm)
    document["helm"]["per_instance"][1]["correct"] = "yes"
    with pytest.raises(ResultsError, match=r"\$\.helm\.per_instance\[1\]\.correct must be boolean \(section of suite"):
        validate_document(document, source="result.json", suites=helm_registry.suites)


def test_a_section_of_no_loaded_suite_is_refused(tmp_path: Path, helm: ModuleType,
                                                 helm_registry: plugins.Registry) -> None:
    document = _helm_document(tmp_path, helm)
    document["helm_extra"] = {"x": 1}
    with pytest.raises(ResultsError, match=r"\$ must not contain \{'helm_extra'\} properties \(no loaded suite "
                       r"owns a section 'helm_extra'; sections of the loaded suites: helm\)"):
        validate_document(document, source="result.json", suites=helm_registry.suites)


def test_the_section_is_required_for_the_statuses_the_suite_says(tmp_path: Path, helm: ModuleType,
                                                                 helm_registry: plugins.Registry) -> None:
    document = _helm_document(tmp_path, helm)
    del document["helm"]
    with pytest.raises(ResultsError, match=r"\$ must contain \['helm'\] \(a 'helm' result with status 'valid'"):
        validate_document(document, source="result.json", suites=helm_registry.suites)
    document["status"] = "partial"  # not in required_for
    validate_document(document, source="result.json", suites=helm_registry.suites)


def test_a_result_of_a_suite_no_plugin_provides_names_the_plugin_that_would(
    tmp_path: Path, helm: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry_file = tmp_path / "registry.yaml"
    entry = Path(__file__).resolve().parent.parent / "registry.yaml"
    text = entry.read_text(encoding="utf-8") + (
        "\n  - name: cmx-helm\n    distribution: cmx-helm\n    summary: HELM scenarios\n"
        "    source: {path: tests/suite_plugin}\n    provides:\n      steps: [helm.eval]\n"
        "      suites: [helm]\n    cmx_core: \">=0.1,<0.2\"\n    state: incubating\n"
        "    license: Apache-2.0\n    maintainers: [{name: cmx maintainers}]\n")
    registry_file.write_text(text, encoding="utf-8")
    monkeypatch.setenv("CMX_REGISTRY", str(registry_file))
    document = _helm_document(tmp_path, helm)
    core_only = _registry_with(monkeypatch).suites
    with pytest.raises(ResultsError) as caught:
        validate_document(document, source="result.json", suites=core_only)
    assert str(caught.value) == (
        "result.json: invalid result document: $.benchmark.suite 'helm' is a suite no loaded plugin "
        "provides; plugin cmx-helm provides it: cmx plugins install cmx-helm")


def test_a_suite_nobody_claims_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cmx_core.providers.values import ResultPart

    part = ResultPart(status="completed", benchmark={"suite": "wordcount", "task": "t"})
    document = example_document(tmp_path, part=part)
    with pytest.raises(ResultsError, match=r"\$\.benchmark\.suite 'wordcount' is a suite no loaded plugin "
                       r"provides; no plugin in registry.yaml claims it$"):
        validate_document(document, source="result.json", suites=_registry_with(monkeypatch).suites)


def test_without_suites_only_the_envelope_is_checked(tmp_path: Path, helm: ModuleType) -> None:
    """Readers of stored results (``suites=None``) still read a suite whose plugin is gone."""
    document = _helm_document(tmp_path, helm, scenario="broken")
    validate_document(document, source="result.json")
    document["helm"] = [1]
    with pytest.raises(ResultsError, match=r"\$\.helm must be object \(a suite section\)"):
        validate_document(document, source="result.json")
    document.pop("helm")
    document["Helm"] = {}
    with pytest.raises(ResultsError, match=r"\$ must not contain \{'Helm'\} properties"):
        validate_document(document, source="result.json")


# -- end to end: cmx run, then cmx results ----------------------------------------------------


def _json(cli: Callable[..., Any], *args: str) -> Any:
    result = cli(*args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_a_helm_run_goes_end_to_end_through_cmx_results(
    helm_registry: plugins.Registry, cli: Callable[..., Any], tmp_path: Path
) -> None:
    first = _json(cli, "run", "recipe", "--tags=helm,eval")
    second = _json(cli, "run", "recipe", "--tags=helm,eval", "--scenario=boolq")
    for doc, task in ((first, "mmlu"), (second, "boolq")):
        assert doc["status"] == "valid" and doc["benchmark"]["suite"] == "helm"
        assert doc["benchmark"]["task"] == task
        assert doc["helm"]["scenario"] == task and doc["helm"]["instances"] == 4
        assert doc["metrics"]["exact_match"] == {"value": 0.75, "unit": "fraction", "higher_is_better": True}

    listed = {r["run_id"]: r for r in _json(cli, "results", "list")["runs"]}
    assert listed[first["run_id"]]["suite"] == "helm" and listed[second["run_id"]]["task"] == "boolq"

    shown = _json(cli, "results", "show", first["run_id"])
    assert shown["helm"] == first["helm"]

    # another scenario is another configuration: its own series unless compared across it
    compared = _json(cli, "results", "compare", first["run_id"], second["run_id"])
    rows = {row["name"]: row for row in compared["metrics"]}
    assert [c["verdict"] for c in rows["exact_match"]["cells"]] == ["baseline", "other series"]
    across = _json(cli, "results", "compare", "--across", "scenario", first["run_id"], second["run_id"])
    rows = {row["name"]: row for row in across["metrics"]}
    assert [c["verdict"] for c in rows["exact_match"]["cells"]] == ["baseline", "same"]

    dest = tmp_path / "helm.csv"
    exported = cli("results", "export", "--format", "csv", str(dest), first["run_id"], second["run_id"])
    assert exported.code == 0, exported.err
    with dest.open(encoding="utf-8") as handle:
        rows_csv = list(csv.DictReader(handle))
    assert [r["helm.scenario"] for r in rows_csv] == ["mmlu", "boolq"]
    assert [r["benchmark.suite"] for r in rows_csv] == ["helm", "helm"]


def test_a_run_whose_section_breaks_its_schema_fails_naming_the_plugin(
    helm_registry: plugins.Registry, cli: Callable[..., Any]
) -> None:
    result = cli("run", "recipe", "--tags=helm,eval", "--scenario=broken")
    assert result.code == 1
    errors = [line for line in result.err_lines if line.startswith("cmx: error:")]
    assert len(errors) == 1 and errors[0].endswith(
        "$.helm.scenario must be string (section of suite 'helm' from plugin cmx-helm)"), result.err
    recorded = next(line for line in result.err_lines if line.startswith("cmx: the failed run was recorded in "))
    document = json.loads(Path(recorded.rsplit(" ", 1)[1]).read_text())  # a failed run records an error result
    assert document["status"] == "error" and "helm" not in document
    assert "$.helm.scenario must be string" in document["error"]["message"]


def _entry(suites: str) -> str:
    return ("schema_version: 1\nplugins:\n  - name: cmx-helm\n    distribution: cmx-helm\n"
            "    summary: HELM scenarios\n    source: {index: cmx-helm}\n    provides:\n"
            f"      steps: [helm.eval]\n      suites: {suites}\n      recipes: [\"helm,eval\"]\n"
            "    cmx_core: \">=0.1,<0.2\"\n    state: incubating\n    license: MIT\n"
            "    maintainers: [{name: Tess}]\n")


def test_registry_claims_of_suites_are_checked_against_the_plugin(
    helm_registry: plugins.Registry, tmp_path: Path
) -> None:
    from cmx_core.plugins.registry_check import check_installed
    from cmx_core.plugins.registry_yaml import read_registry

    path = tmp_path / "registry.yaml"
    path.write_text(_entry("[helm]"), encoding="utf-8")
    assert check_installed(read_registry(path), helm_registry) == ([], 1)
    path.write_text(_entry("[helm, helm-lite]"), encoding="utf-8")
    problems, _ = check_installed(read_registry(path), helm_registry)
    assert [str(p).split(": ", 1)[1] for p in problems] == [
        "entry 'cmx-helm' key 'provides.suites': claims 'helm-lite' but cmx-helm 0 does not register it"]
