"""Recipe loading defects found in review: catalog walk robustness (symlink loops, dangling
links), duplicate names within one source, validation gaps (each reported with file:line:key),
negative numbers in conditions, non-finite numbers, and inputs named like cmx's options."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from cmx_core.catalog.catalog import Source, load_catalog
from cmx_core.errors import RecipeError, UsageError
from cmx_core.recipes.expr import ExpressionError, compile_expression
from cmx_core.recipes.load import load_recipe_file
from cmx_core.recipes.model import CLI_RESERVED_INPUTS, InputSpec

HEADER = """
name: {name}
tags: [{name}]
summary: a test recipe
"""
BASE = HEADER + """steps:
  - {{uses: shell, with: {{cmd: [echo, hi]}}}}
"""


def _recipe(recipes, name: str = "basic") -> Path:
    return recipes(name, BASE.format(name=name))


# -- the catalog walk --------------------------------------------------------------------


def test_symlink_loop_is_walked_once(cli, recipes) -> None:
    _recipe(recipes)
    sub = recipes.dir / "sub"
    sub.mkdir()
    (sub / "inner.yaml").write_text(BASE.format(name="inner"))
    os.symlink("..", sub / "loop")
    result = cli("list", "recipes", "--recipes", recipes.dir, "--json")
    assert result.code == 0, result.err
    names = [r["name"] for r in json.loads(result.out)]
    assert names.count("basic") == 1 and names.count("inner") == 1
    catalog = load_catalog(sources=[Source("--recipes", recipes.dir)])
    assert not catalog.errors and set(catalog.listed) == {"basic", "inner"}


def test_dangling_recipe_symlink_is_a_catalog_error(cli, recipes, monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI means --strict
    _recipe(recipes)
    os.symlink("nowhere.yaml", recipes.dir / "x.yaml")
    listed = cli("list", "recipes", "--recipes", recipes.dir)  # lists the rest, exits 2
    assert "basic" in listed.out and "x.yaml: cannot read" in listed.err and "Traceback" not in listed.err
    catalog = load_catalog(sources=[Source("--recipes", recipes.dir)])
    message = catalog.errors[str(recipes.dir / "x.yaml")]
    assert "cannot read" in message and "nowhere.yaml" in message
    planned = cli("plan", "--tags=basic", "--recipes", recipes.dir)  # it does not need x.yaml
    assert planned.code == 0 and "basic" in planned.out
    assert planned.err_lines == [f"cmx: warning: skipped a broken recipe file: {message} "
                                 "(--strict makes this an error)"]
    strict = cli("plan", "--tags=basic", "--recipes", recipes.dir, "--strict")
    assert strict.code == 2 and "x.yaml" in strict.err and "Traceback" not in strict.err


# -- names unique within a source, shadowing across sources ------------------------------


def test_same_name_twice_in_one_directory_is_an_error(cli, recipes, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI means --strict
    first = recipes("a", BASE.format(name="dup"))
    second = recipes("b", BASE.format(name="dup"))
    catalog = load_catalog(sources=[Source("--recipes", recipes.dir)])
    assert catalog.errors == {
        str(second): f"{second}: recipe name 'dup' is also defined in {first}; "
        "names must be unique within a recipe directory"
    }
    assert catalog.listed["dup"].path == str(first)
    result = cli("plan", "--tags=dup", "--recipes", recipes.dir)  # which one runs is unclear: an error (#49)
    assert result.code == 2 and result.err_lines == [f"cmx: error: {second}: recipe name 'dup' is also defined in "
                                                     f"{first}; names must be unique within a recipe directory"]
    assert cli("show", "recipe", "dup", "--recipes", recipes.dir).code == 2
    strict = cli("plan", "--tags=dup", "--recipes", recipes.dir, "--strict")
    assert strict.code == 2 and "is also defined in" in strict.err
    second.unlink()  # the same name in a lower-precedence source is a legitimate shadow
    low_dir = tmp_path / "low"
    low_dir.mkdir()
    (low_dir / "dup.yaml").write_text(BASE.format(name="dup"))
    catalog = load_catalog(sources=[Source("--recipes", recipes.dir), Source("core", low_dir)])
    assert not catalog.errors and catalog.listed["dup"].path == str(first)
    assert [i.path for i in catalog.shadowed_listed["dup"]] == [str(low_dir / "dup.yaml")]


# -- validation gaps ---------------------------------------------------------------------

GOOD = """
name: good
version: 1.2.0rc1
tags: [good]
summary: uses every feature the new checks look at
inputs:
  size: &int {type: integer, default: 3}
  output: {type: string, default: out}
  count: {<<: *int, default: 4}            # a merge key is not a duplicate key
variations:
  cpu: {group: device, default: true}
  gpu: {group: device}
  fp16: {}
deps:
  - {tags: [other], with: {n: "{{ inputs.size | int }}", label: "x{{ inputs['size'] }}y"},
     when: "inputs.size > -1 and variation.device == 'cpu'"}
steps:
  - uses: shell
    when: "'fp16' in variations or inputs['size'] >= -2.5"
    with: {cmd: [echo, "{{ inputs.size }}", "{% if inputs.size %}big{% endif %}"]}
outputs:
  result: {value: "{{ node.dir }}/{{ inputs.output }}"}
cache: {enabled: false, expires: 1d}
"""


def test_a_recipe_using_every_checked_feature_loads(recipes) -> None:
    recipe = load_recipe_file(recipes("good", GOOD))
    assert recipe.version == "1.2.0rc1" and recipe.cache.enabled is False
    assert recipe.inputs["count"].type == "integer" and recipe.inputs["count"].default == 4


BAD_CASES = {
    "cache-enabled-string": (
        "cache: {enabled: 'no'}\n", "cache.enabled", "expected true or false"),
    "version-not-pep440": (
        "version: banana\n", "version", "PEP 440"),
    "input-name-hyphen": (
        "inputs:\n  batch-size: {type: integer}\n", "inputs.batch-size", "must match"),
    "input-name-uppercase": (
        "inputs:\n  Size: {type: integer}\n", "inputs.Size", "must match"),
    "step-template-syntax": (
        "inputs:\n  size: {}\nsteps:\n  - uses: shell\n    with: {cmd: [echo, '{{ inputs.size + }}']}\n",
        "steps.0.with.cmd[1]", "invalid template"),
    "dep-template-syntax": (
        "deps:\n  - tags: [other]\n    with: {n: '{% if x %}'}\n", "deps.0.with.n", "invalid template"),
    "variation-dep-template-syntax": (
        "variations:\n  big:\n    deps:\n      - {tags: [other], with: {n: '{{ a b }}'}}\n",
        "variations.big.deps.0.with.n", "invalid template"),
    "output-template-syntax": (
        "outputs:\n  result: {value: '{{ node.dir }'}\n", "outputs.result.value", "invalid template"),
    "when-undeclared-input": (
        "inputs:\n  size: {type: integer}\nsteps:\n  - {uses: shell, when: 'inputs.sise > 1'}\n",
        "steps.0.when", "inputs.sise"),
    "when-undeclared-input-subscript": (
        "inputs:\n  size: {}\ndeps:\n  - {tags: [other], when: \"inputs['sise'] == 1\"}\n",
        "deps.0.when", "inputs.sise"),
    "when-undeclared-group": (
        "variations:\n  cpu: {group: device}\ndeps:\n  - {tags: [other], when: \"variation.devcie == 'cpu'\"}\n",
        "deps.0.when", "variation.devcie"),
    "when-ungrouped-variation-as-group": (
        "variations:\n  fp16: {}\n  big:\n    deps:\n      - {tags: [other], when: 'variation.fp16'}\n",
        "variations.big.deps.0.when", "not a variation group"),
    "duplicate-top-key": (
        "summary: again\n", "summary", "duplicate key 'summary' (first defined on line 3)"),
    "duplicate-nested-key": (
        "inputs:\n  size: {type: integer}\n  size: {type: string}\n", "inputs.size", "duplicate key 'size'"),
    "recursive-alias": (
        "requires: &loop {os: *loop}\n", "requires", "recursive data"),
    "nan-default": (
        "inputs:\n  x: {type: number, default: .nan}\n", "inputs.x.default", "expects number"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_validation_error_names_file_line_and_key(recipes, case: str) -> None:
    extra, key, message = BAD_CASES[case]
    path = recipes("bad", (HEADER if "steps:" in extra else BASE).format(name="bad").lstrip() + extra)
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    error = info.value
    assert error.location.key == key and message in error.message, str(error)
    assert error.location.path == str(path)
    lines = path.read_text().splitlines()
    wanted = [part for part in key.split("[")[0].split(".") if not part.isdigit()][-1]
    assert wanted in lines[error.location.line - 1], (error.location.line, lines)


def test_validation_errors_reach_the_cli_as_one_line(cli, recipes) -> None:
    recipes("bad", BASE.format(name="bad").lstrip() + "cache: {enabled: 'no'}\n")
    result = cli("plan", "--tags=bad", "--recipes", recipes.dir)
    assert result.code == 2 and len(result.err_lines) == 1
    assert "bad.yaml:6: cache.enabled: expected true or false" in result.err


# -- expressions and numbers -------------------------------------------------------------


def test_unary_minus_on_numbers_in_conditions() -> None:
    assert compile_expression("inputs.n > -1").evaluate({"inputs": {"n": 0}}) is True
    assert compile_expression("inputs.n in [-2, -1.5]").evaluate({"inputs": {"n": -1.5}}) is True
    for text in ("-inputs.n > 1", "--1 == 1", "-True"):
        with pytest.raises(ExpressionError, match="unary minus"):
            compile_expression(text)


def test_negative_bound_in_when_plans(cli, recipes) -> None:
    recipes("neg", BASE.format(name="neg").lstrip().replace(
        "  - {uses: shell,", "  - {when: 'inputs.n > -1', uses: shell,"
    ) + "inputs:\n  n: {type: integer, default: 0}\n")
    result = cli("plan", "--tags=neg", "--recipes", recipes.dir, "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_number_inputs_reject_non_finite_values(text: str) -> None:
    spec = InputSpec("x", "number", min=0, max=10)
    with pytest.raises(UsageError, match="input 'x' expects number"):
        spec.coerce(text, "--x")
    assert spec.coerce("2.5", "--x") == 2.5 and spec.coerce(3, "--x") == 3
    assert not math.isnan(InputSpec("y", "number").coerce("0", "--y"))


def test_nan_on_the_command_line_is_a_usage_error(cli, recipes) -> None:
    recipes("num", BASE.format(name="num").lstrip() + "inputs:\n  x: {type: number, default: 1, min: 0}\n")
    result = cli("plan", "--tags=num", "--recipes", recipes.dir, "--json", "--x=nan")
    assert result.code == 2 and "input 'x' expects number, got 'nan'" in result.err
    assert json.loads(result.out)["exit_code"] == 2  # one valid JSON document, no NaN in it


# -- inputs named like cmx's own options -------------------------------------------------


def test_show_recipe_spells_reserved_inputs_with_input_prefix(cli, recipes) -> None:
    recipes("clash", BASE.format(name="clash").lstrip()
            + "inputs:\n  output: {}\n  tags: {}\n  no_cache: {type: boolean}\n  size: {type: integer}\n")
    result = cli("show", "recipe", "clash", "--recipes", recipes.dir)
    assert result.code == 0, result.err
    for name in ("output", "tags", "no_cache"):
        assert f"- `--input.{name}` " in result.out
    assert "- `--size` " in result.out and "--input.size" not in result.out
    shown = json.loads(cli("show", "recipe", "clash", "--recipes", recipes.dir, "--json").out)
    assert shown["inputs"]["output"]["option"] == "--input.output"
    assert shown["inputs"]["size"]["option"] == "--size"


@pytest.mark.parametrize("command", ["run", "plan"])
def test_reserved_inputs_cover_every_option_of_run_and_plan(command: str) -> None:
    from cmx_core.cli.main import build_parser

    parser = build_parser(command)
    sub = next(a for a in parser._actions if a.choices and command in a.choices).choices[command]
    options = {s[2:].replace("-", "_") for a in sub._actions for s in a.option_strings if s.startswith("--")}
    assert options and options <= CLI_RESERVED_INPUTS, options - CLI_RESERVED_INPUTS
