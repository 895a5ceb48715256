"""The llama recipe's model dependency satisfied by a detected model (--model_tags): the plan
takes the model from the models fact, builds no tiny Llama, and refuses a tag no detected
model has before anything runs (docs/models.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import CmxError

FACTS = Path(__file__).resolve().parents[3] / "examples" / "facts"


def _facts_with_models(tmp_path: Path, models: list[dict[str, Any]]) -> Path:
    document = json.loads((FACTS / "h200-1x.json").read_text())
    document["facts"]["models"] = models
    out = tmp_path / "facts.json"
    out.write_text(json.dumps(document))
    return out


def _plan(inputs: dict[str, Any], facts: Path) -> dict[str, Any]:
    from cmx_core.testing.runs import plan_view

    return plan_view("mlperf,inference,llama", inputs, facts_file=facts).to_json()


def test_a_detected_model_satisfies_the_dependency_and_nothing_is_built(cmx_home: Path, tmp_path: Path) -> None:
    model = tmp_path / "Llama-3.1-8B-Instruct"
    model.mkdir()
    (model / "config.json").write_text("{}")
    facts = _facts_with_models(tmp_path, [
        {"name": "acme/other", "path": str(tmp_path), "tags": ["llama", "llama-tiny"], "digest": "11" * 32},
        {"name": "meta-llama/Llama-3.1-8B-Instruct", "path": str(model), "tags": ["llama", "llama3.1-8b"],
         "digest": "ab" * 32}])
    plan = _plan({"model_tags": "llama3.1-8b"}, facts)
    recipes = [n["recipe"] for n in plan["nodes"]]
    assert "get-detected-model" in recipes and "get-tiny-llama" not in recipes
    node = next(n for n in plan["nodes"] if n["recipe"] == "get-detected-model")
    assert node["inputs"]["path"] == str(model) and node["inputs"]["digest"] == "ab" * 32
    without = [n["recipe"] for n in _plan({}, facts)["nodes"]]
    assert "get-tiny-llama" in without and "get-detected-model" not in without


def test_a_tag_no_detected_model_has_is_refused_at_plan_time(cmx_home: Path, tmp_path: Path) -> None:
    facts = _facts_with_models(tmp_path, [{"name": "acme/tiny", "path": str(tmp_path), "tags": ["llama-tiny"]}])
    with pytest.raises(CmxError, match=r"no detected model has the tags llama3\.1-8b .*acme/tiny: llama-tiny"):
        _plan({"model_tags": "llama3.1-8b"}, facts)


def test_the_doc_names_the_recipes_the_input_and_the_function() -> None:
    doc = (FACTS.parents[1] / "docs" / "models.md").read_text()
    llama = (FACTS.parents[1] / "plugins/mlperf/src/cmx_mlperf/recipes/llama.yaml").read_text()
    detect = FACTS.parents[1] / "plugins/detect/src/cmx_detect/recipes"
    assert "detected_model(facts.models, inputs.model_tags)" in llama and "--model_tags" in doc
    assert "tags: [get, model, detected]" in (detect / "get-detected-model.yaml").read_text()
    assert "tags: [detect, model, models]" in (detect / "detect-models.yaml").read_text()
    assert "`detected_model(facts.models, TAGS)`" in doc


def test_cmx_plan_refuses_the_missing_tag_in_one_line_with_exit_2(cmx_home: Path, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    facts = _facts_with_models(tmp_path, [{"name": "acme/tiny", "path": str(tmp_path), "tags": ["llama-tiny"]}])
    out = subprocess.run([sys.executable, "-m", "cmx_core", "plan", "recipe", "--tags=mlperf,inference,llama",
                          "--model_tags=llama3.1-8b", "--facts", str(facts)], capture_output=True, text=True,
                         timeout=300, check=False, env={**os.environ, "CMX_HOME": str(cmx_home)})
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "no detected model has the tags llama3.1-8b" in out.stderr


def test_two_models_with_the_same_tags_are_told_apart_by_digest_or_path(cmx_home: Path, tmp_path: Path) -> None:
    """#50 item 6: the first of two same-tag models always won; now the plan says both and
    takes ``@DIGEST-PREFIX`` or the model's path among the tags."""
    first, second = tmp_path / "a" / "Llama-3.1-8B", tmp_path / "b" / "Llama-3.1-8B"
    for model in (first, second):
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    facts = _facts_with_models(tmp_path, [
        {"name": "meta-llama/Llama-3.1-8B", "path": str(first), "tags": ["llama3.1-8b"], "digest": "ab" * 32},
        {"name": "meta-llama/Llama-3.1-8B", "path": str(second), "tags": ["llama3.1-8b"], "digest": "cd" * 32}])
    with pytest.raises(CmxError, match=r"2 detected models have the tags llama3\.1-8b: .*\(@abababababab\).*"
                                       r"\(@cdcdcdcdcdcd\); add one's @DIGEST-PREFIX or its path"):
        _plan({"model_tags": "llama3.1-8b"}, facts)
    for pick, chosen in (("llama3.1-8b,@cdcd", second), (f"llama3.1-8b,{first}", first)):
        node = next(n for n in _plan({"model_tags": pick}, facts)["nodes"] if n["recipe"] == "get-detected-model")
        assert node["inputs"]["path"] == str(chosen)


def test_a_facts_file_without_models_says_how_to_add_them(cmx_home: Path) -> None:
    """#50 item 6: --model_tags with a --facts FILE that holds no models fact told the user to
    pass --facts FILE; now it names the file and the command that detects into it."""
    import os
    import subprocess
    import sys

    facts = FACTS / "h200-1x.json"
    out = subprocess.run([sys.executable, "-m", "cmx_core", "plan", "recipe", "--tags=mlperf,inference,llama",
                          "--model_tags=llama3.1-8b", "--facts", str(facts)], capture_output=True, text=True,
                         timeout=300, check=False, env={**os.environ, "CMX_HOME": str(cmx_home)})
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"reads facts.models, which the facts file {facts} does not hold" in out.stderr
    assert f"cmx detect --json > {facts}" in out.stderr and "pass --facts FILE" not in out.stderr
