"""The conformance kit (cmx_core.testing): its checks catch bad plugins and pass good ones."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from cmx_core.api import Capabilities, Metric, ResultPart, StepOutput, StepType, hookimpl
from cmx_core.plugins import loader as plugins
from cmx_core.testing import (
    IsolatedEnv,
    StepSample,
    freeze,
    make_step_context,
    output_problems,
    provider_problems,
    recipe_problems,
    write_plugin_package,
)

ROOT = Path(__file__).resolve().parent.parent


def _registry(monkeypatch: pytest.MonkeyPatch, **hooks: object) -> plugins.Registry:
    monkeypatch.setenv("CMX_LOAD_PLUGINS", "")
    return plugins.load_registry(extra=[("kit", SimpleNamespace(**hooks))])


def test_provider_problems_name_each_bad_field(cmx_home: Path, monkeypatch) -> None:
    @hookimpl
    def cmx_register_steps(register):
        register(StepType(name="kit.ok", summary="fine", run=lambda ctx: {}))
        register(StepType(name="Kit Bad", summary="two\nlines", run="not callable",
                          params={"x": 1}, capabilities={"needs_gpu": True}))  # type: ignore[arg-type]

    problems = provider_problems(_registry(monkeypatch, cmx_register_steps=cmx_register_steps), "kit")
    assert problems == [
        "step 'Kit Bad': names are lower-case [a-z0-9._-], starting a-z",
        "step 'Kit Bad': summary must be one non-empty line",
        "step 'Kit Bad': run must be callable, not 'not callable'",
        "step 'Kit Bad': capabilities must be a Capabilities, not {'needs_gpu': True}",
        "step 'Kit Bad': params maps names to one-line descriptions",
    ]


def test_recipe_problems_unknown_step_and_invalid_recipe(
    cmx_home: Path, monkeypatch, tmp_path: Path
) -> None:
    (tmp_path / "uses-missing.yaml").write_text(
        "name: a\ntags: [a]\nsummary: s\nsteps:\n  - uses: mlperf.loadgen\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(
        "name: b\ntags: [b]\nsummary: s\nstepz: []\n", encoding="utf-8")

    @hookimpl
    def cmx_recipe_paths():
        return [tmp_path, tmp_path / "missing"]

    problems = recipe_problems(_registry(monkeypatch, cmx_recipe_paths=cmx_recipe_paths), "kit")
    assert len(problems) == 3, problems
    assert re.search(r"bad.yaml:4: .*stepz", problems[0]), problems[0]
    assert problems[1] == (
        f"{tmp_path / 'uses-missing.yaml'}: no loaded plugin provides step type "
        "'mlperf.loadgen'; plugin cmx-mlperf provides it: cmx plugins install cmx-mlperf")
    assert problems[2] == f"recipe path {tmp_path / 'missing'} is not a directory"


def test_output_problems() -> None:
    sample = StepSample(expect_outputs=("a", "b"))
    bad = StepOutput(outputs={"a": object()}, result=ResultPart(
        status="completed", benchmark={}, metrics={"m": Metric(1, "", True)}))
    assert output_problems("s", bad, sample) == [
        "step 's' did not return output 'b' (got ['a'])",
        "step 's': outputs must be JSON data (or paths): object is not JSON data",
        "step 's': metric 'm' has no unit",
        ("step 's' result: invalid result document: $.metrics.m.unit must be longer than or "
         "equal to 1 characters"),
    ]
    good = StepOutput(outputs={"a": Path("/x"), "b": [1, {"c": None}]})
    assert output_problems("s", good, sample) == []


def test_output_problems_validate_the_result_document() -> None:
    sample = StepSample()
    part = ResultPart(status="completed", benchmark={"suite": "wordcount", "task": "t"},
                      metrics={"w": Metric(3, "words", True)})
    problems = output_problems("s", StepOutput(result=part), sample)
    assert len(problems) == 1
    assert problems[0].startswith("step 's' result: invalid result document: $.benchmark.suite")
    fixed = ResultPart(status="completed", benchmark={"suite": "custom", "task": "t"},
                       metrics={"w": Metric(3, "words", True)})
    assert output_problems("s", StepOutput(result=fixed), sample) == []


def test_recipes_are_planned_with_stand_ins_for_required_inputs(tmp_path: Path, monkeypatch) -> None:
    from cmx_core.testing.checks import plan_problems, required_inputs

    recipe = tmp_path / "recipes" / "needs.yaml"
    recipe.parent.mkdir()
    recipe.write_text("name: needs\ntags: [kit, needs]\nsummary: s\ninputs:\n"
                      "  data: {type: path, required: true}\n  size: {type: integer, required: true, min: 3}\n"
                      "  mode: {type: choice, choices: [a, b], required: true}\n"
                      "steps:\n  - {uses: shell, with: {cmd: [\"true\"]}}\n", encoding="utf-8")
    stand_ins = required_inputs(recipe, tmp_path / "work")
    assert stand_ins == {"data": str(tmp_path / "work" / "data"), "size": 3, "mode": "a"}
    assert (tmp_path / "work" / "data").is_dir()
    monkeypatch.setenv("CMX_RECIPES_PATH", str(recipe.parent))
    assert plan_problems(recipe, stand_ins, None) == []
    assert plan_problems(recipe, {}, None) == [
        f"{recipe}: recipe 'needs' does not plan: recipe needs needs input 'data' (path): pass --data=VALUE"]


def test_make_step_context_is_frozen(tmp_path: Path) -> None:
    ctx = make_step_context(tmp_path, params={"a": {"b": [1, 2]}})
    with pytest.raises(TypeError):
        ctx.params["a"]["b"] = 3  # type: ignore[index]
    assert ctx.params["a"]["b"] == (1, 2)
    assert all(p.is_dir() for p in (ctx.work_dir, ctx.log_dir, ctx.run_dir, ctx.cache_dir))
    assert freeze([{"x": 1}])[0]["x"] == 1
    assert Capabilities().names() == []


# --------------------------------------------------------------------------- end to end

BAD_PLUGIN = '''\
import jsonschema  # heavy at import time: the kit must catch it
from pathlib import Path
from cmx_core.api import StepType, hookimpl

@hookimpl
def cmx_register_steps(register):
    register(StepType(name="shoddy.run", summary="runs", run=lambda ctx: {"n": 1}))
    register(StepType(name="shoddy.other", summary="no sample", run=lambda ctx: {}))

@hookimpl
def cmx_recipe_paths():
    return [Path(__file__).parent / "recipes"]
'''

BAD_TESTS = '''\
from cmx_core.testing import PluginConformance, StepSample

class TestShoddy(PluginConformance):
    plugin = "shoddy"
    step_samples = {"shoddy.run": StepSample(expect_outputs=("n", "missing"))}
'''


@pytest.mark.slow
def test_the_kit_fails_a_shoddy_plugin_test_by_test(tmp_path: Path) -> None:
    src = write_plugin_package(tmp_path, "shoddy", module=BAD_PLUGIN, core="")
    (src / "src" / "cmx_shoddy" / "recipes" / "r.yaml").write_text(
        "name: r\ntags: [r]\nsummary: s\nsteps:\n  - uses: nobody.has\n", encoding="utf-8")
    (src / "tests").mkdir()
    (src / "tests" / "test_shoddy_conformance.py").write_text(BAD_TESTS, encoding="utf-8")
    env = IsolatedEnv.create(tmp_path / "venv", inherit=True)
    env.pip("install", "--no-deps", "--quiet", str(src))
    done = env.run_python(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
                           str(src / "tests")], env={"CMX_HOME": str(tmp_path / "home")},
                          check=False, cwd=src)
    failed = set(re.findall(r"FAILED \S+::TestShoddy::(\w+)", done.stdout))
    assert failed == {
        "test_accepts_this_cmx_core",
        "test_recipes_validate_and_use_known_steps",
        "test_every_step_has_a_sample",
        "test_steps_run_on_samples",
        "test_import_is_light",
        "test_recipes_plan",
    }, done.stdout[-3000:]
    # the two executor checks, the detector and the example checks pass: it registers none
    assert "6 failed, 8 passed" in done.stdout
    assert "must depend on cmx-core with a version range" in done.stdout
    assert "no loaded plugin provides step type 'nobody.has'" in done.stdout
    assert "did not return output 'missing'" in done.stdout
    assert "imports ['jsonschema']" in done.stdout
