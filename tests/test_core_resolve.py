"""Catalog, conditions and the resolver: selection, variations, shadowing, determinism."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import cmx_core
import cmx_core.api
from cmx_core.catalog.catalog import Index, Source, load_catalog
from cmx_core.errors import ResolveError
from cmx_core.recipes.expr import ExpressionError, compile_expression

CHAIN = {
    "top": """
        name: top
        version: "2.1"
        tags: [top, bench]
        summary: the top
        inputs:
          n: {type: integer, default: 4, min: 1}
          mode: {type: choice, choices: [fast, slow], default: fast}
        variations:
          cpu: {group: device, default: true}
          gpu: {group: device, requires: {os.name: linux}}
          fp16: {inputs: {mode: slow}}
          batch.#: {inputs: {n: "#"}}
        deps:
          - {tags: [mid], as: mid, with: {count: "{{ inputs.n * 2 }}"}}
          - {tags: [leaf], as: extra, when: "variation.device == 'gpu'"}
        steps:
          - {uses: shell, with: {cmd: [echo, "{{ deps.mid.total }}"]}}
    """,
    "mid": """
        name: mid
        version: "1.0"
        tags: [mid]
        summary: the middle
        inputs:
          count: {type: integer, default: 1}
        deps:
          - {tags: [leaf], version: ">=1,<2"}
        outputs: [total]
    """,
    "leaf": """
        name: leaf
        version: "1.5"
        tags: [leaf]
        summary: the leaf
    """,
}


@pytest.fixture
def chain(recipes):
    for name, text in CHAIN.items():
        recipes(name, text)
    return recipes.dir


def test_variations_defaults_parametric_and_deps(chain) -> None:
    plan = cmx_core.api.plan("top,batch.16", recipes_dirs=[chain])
    root = plan.root
    assert root.id == "top"
    assert dict(root.variations) == {"cpu": True, "batch": "16"}
    assert root.inputs["n"] == 16 and root.inputs["mode"] == "fast"
    mid = plan.node(root.deps["mid"])
    assert mid.inputs["count"] == 32  # a template keeps its native type
    assert [n.id for n in plan.nodes] == ["leaf", "mid", "top"]
    assert "extra" not in root.deps


def test_when_condition_and_variation_inputs(chain) -> None:
    plan = cmx_core.api.plan(["top", "gpu", "fp16"], recipes_dirs=[chain])
    assert plan.root.deps["extra"] == "leaf"  # shared node: same recipe, variations and inputs
    assert plan.root.inputs["mode"] == "slow"
    assert plan.root.facts_used["os.name"] == "linux"


def test_plan_is_deterministic_and_keys_change_with_inputs(chain) -> None:
    first = cmx_core.api.plan("top", {"n": "3"}, recipes_dirs=[chain]).to_json()
    second = cmx_core.api.plan("top", {"n": "3"}, recipes_dirs=[chain]).to_json()
    assert first == second
    other = cmx_core.api.plan("top", {"n": "5"}, recipes_dirs=[chain]).to_json()
    keys = {n["id"]: n["cache"]["key"] for n in first["nodes"]}
    other_keys = {n["id"]: n["cache"]["key"] for n in other["nodes"]}
    assert keys["leaf"] == other_keys["leaf"]
    assert keys["mid"] != other_keys["mid"] and keys["top"] != other_keys["top"]


def test_exact_tag_match_breaks_a_tie(recipes) -> None:
    recipes("a", "name: a\ntags: [x, y]\nsummary: a\n")
    recipes("b", "name: b\ntags: [x, y, z]\nsummary: b\n")
    assert cmx_core.api.plan("x,y", recipes_dirs=[recipes.dir]).root.id == "a"
    assert cmx_core.api.plan("x,y,z", recipes_dirs=[recipes.dir]).root.id == "b"
    assert cmx_core.api.plan("x,-z", recipes_dirs=[recipes.dir]).root.id == "a"


def test_shadowing_precedence(recipes, tmp_path, monkeypatch) -> None:
    recipes("detect-os", "name: detect-os\ntags: [detect, os]\nsummary: mine\n")
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "d.yaml").write_text("name: detect-os\ntags: [detect, os]\nsummary: from env\n")
    monkeypatch.setenv("CMX_RECIPES_PATH", str(env_dir))
    plan = cmx_core.api.plan("detect,os", recipes_dirs=[recipes.dir])
    assert plan.root.recipe.summary == "mine" and plan.root.recipe.source == "--recipes"
    assert len(plan.shadowed["detect-os"]) >= 2  # the env one and the core/plugin one
    plan = cmx_core.api.plan("detect,os")
    assert plan.root.recipe.summary == "from env"


def test_explain_lists_rejections_and_cache_miss_reason(chain, cli) -> None:
    result = cli("explain", "--recipes", chain, "--tags=top,gpu", "--json")
    doc = json.loads(result.out)
    first = doc["decisions"][0]
    reasons = {c["name"]: c["reason"] for c in first["candidates"]}
    assert reasons["top"] == "all tags match"
    assert {"name": "gpu", "why": "selected by a query tag"} in first["variations"]
    assert doc["cache"]["mid"]["changed"] == ["no earlier cache entry of this recipe"]
    failing = cli("explain", "--recipes", chain, "--tags=top,tpu")
    assert failing.code == 2 and "lacks tag 'tpu'" in failing.out


def test_conditions_are_safe() -> None:
    ctx = {"inputs": {"n": 3, "names": ["a", "b"]}, "variation": {"device": "cpu"}, "facts": {}}
    assert compile_expression("inputs.n > 2 and 'a' in inputs.names").evaluate(ctx) is True
    assert compile_expression("variation.device != 'cpu' or not inputs.n").evaluate(ctx) is False
    assert compile_expression("inputs['n'] == 3").evaluate(ctx) is True
    assert compile_expression("facts.gpu.count > 0").evaluate(ctx) is False  # missing is falsy
    for bad in ("open('/etc/passwd')", "[x for x in inputs]", "inputs.n + 1", "inputs.__dict__",
                "inputs[inputs.n]", "lambda: 0", "(yield)"):
        with pytest.raises(ExpressionError):
            compile_expression(bad)


def test_index_reparses_only_changed_files(recipes, cmx_home) -> None:
    for i in range(20):
        recipes(f"r{i}", f"name: r{i}\ntags: [t{i}]\nsummary: recipe {i}\n")
    sources = [Source("test", recipes.dir)]
    first = load_catalog(sources=sources)
    assert first.stats == {"parsed": 20, "files": 20}
    again = load_catalog(sources=sources)
    assert again.stats == {"parsed": 0, "files": 20}
    changed = recipes.dir / "r3.yaml"
    changed.write_text("name: r3\ntags: [t3, new]\nsummary: changed\n")
    os.utime(changed, ns=(time.time_ns(), time.time_ns() + 10_000))
    third = load_catalog(sources=sources)
    assert third.stats["parsed"] == 1 and third.get("r3").summary == "changed"
    (recipes.dir / "r4.yaml").unlink()
    assert load_catalog(sources=sources).get("r4") is None


def test_corrupt_index_is_rebuilt_with_a_warning(recipes, cmx_home, capsys) -> None:
    recipes("a", "name: a\ntags: [a]\nsummary: a\n")
    sources = [Source("test", recipes.dir)]
    load_catalog(sources=sources)
    index_file = next((cmx_home / "cache" / "index").iterdir())
    index_file.write_bytes(b"\x00garbage that is not an index")
    catalog = load_catalog(sources=sources)
    assert catalog.get("a") is not None
    err = capsys.readouterr().err
    assert f"recipe index {index_file} is corrupt; rebuilding it" in err
    assert Index(index_file).dirs  # rebuilt on disk


def test_requires_against_a_facts_file(recipes, tmp_path) -> None:
    recipes("g", "name: g\ntags: [g]\nsummary: g\nrequires: {accelerator: h100}\n")
    facts = tmp_path / "h100.json"
    facts.write_text(json.dumps({"facts": {"accelerator": ["h100"], "os": {"name": "linux"}}}))
    assert cmx_core.api.plan("g", recipes_dirs=[recipes.dir], facts_file=facts).facts_source == str(facts)
    facts.write_text(json.dumps({"facts": {"accelerator": []}}))
    with pytest.raises(ResolveError, match=r"requires accelerator h100; this machine has: none \(facts from"):
        cmx_core.api.plan("g", recipes_dirs=[recipes.dir], facts_file=facts)


def test_core_recipes_validate_against_the_published_schema() -> None:
    import jsonschema
    import yaml

    schema = json.loads((Path(cmx_core.__file__).parent / "schemas" / "recipe.schema.json").read_text())
    from cmx_core.catalog.catalog import core_recipes_dir

    files = sorted(core_recipes_dir().rglob("*.yaml"))
    assert files
    for path in files:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_schema_and_loader_agree_on_unknown_keys() -> None:
    import jsonschema

    schema = json.loads((Path(cmx_core.__file__).parent / "schemas" / "recipe.schema.json").read_text())
    bad = {"name": "x", "tags": ["x"], "summary": "x", "steps": [{"uses": "shell", "wiht": {}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
