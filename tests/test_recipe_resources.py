"""A recipe's ``resources:`` section (cmx_core/recipes/resources.py, docs/recipes.md "Resources"):
the documented example loads as documented, a variation's keys replace the recipe's, a plan
asks per key for the largest of its nodes, and each documented bad value is refused at load
time naming the file, line and key (exit 2 from the CLI, one line). The executor columns of
the doc's table are checked by each executor plugin's tests, from the same table
(:func:`doc_mapping`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from cmx_core.errors import RecipeError
from cmx_core.recipes.load import load_recipe_file
from cmx_core.recipes.resources import NO_RESOURCES, Resources, node_resources, plan_resources
from cmx_core.run import engine

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "recipes.md"
SCHEMA = ROOT / "cmx_core" / "schemas" / "recipe.schema.json"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split("\n## Resources\n", 1)[1].split("\n## ", 1)[0]


def doc_recipe() -> str:
    """The example recipe of the doc's Resources section."""
    return _section().split("```yaml\n", 1)[1].split("```", 1)[0]


def _table(header: str) -> list[list[str]]:
    block = _section().split(header, 1)[1].split("\n\n", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("|") and not line.startswith("|---")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def doc_mapping(column: str) -> dict[str, str]:
    """The doc's table of what each key becomes: ``{key: cell}`` of one executor's column
    (``Slurm``, ``Ray`` or ``Kubernetes``)."""
    rows = _table("| Key | Slurm")
    wanted = ["Key", "Slurm", "Ray", "Kubernetes"].index(column)
    return {row[0].strip("`"): row[wanted] for row in rows}


def write_recipe(folder: Path, text: str, name: str = "r.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def test_the_documented_example_loads_as_documented(tmp_path: Path) -> None:
    recipe = load_recipe_file(write_recipe(tmp_path, doc_recipe()))
    assert recipe.resources == Resources(nodes=2, tasks_per_node=1, cpus=8, gpus=4, memory_bytes=64 << 30,
                                         time_s=7200.0, accelerator="h100")
    assert recipe.resources.world_size == 2 and recipe.resources.memory_mib == 65536
    assert recipe.resources.time_minutes == 120
    assert recipe.variations["big"].resources == Resources(gpus=8)
    jsonschema.validate(yaml.safe_load(doc_recipe()), json.loads(SCHEMA.read_text()))


def test_a_selected_variation_replaces_the_recipes_keys_and_a_plan_takes_the_largest(cmx_home: Path,
                                                                                    tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe())
    plain = engine.plan("train,tiny", recipes_dirs=[tmp_path])
    big = engine.plan("train,tiny,big", recipes_dirs=[tmp_path])
    assert node_resources(plain.root).gpus == 4 and node_resources(big.root).gpus == 8
    assert node_resources(big.root).cpus == 8  # the keys the variation does not set stay the recipe's
    assert plain.root.recipe.resources.nodes == 2  # reachable from every plan node
    merged = plan_resources([big.root, plain.root])
    assert merged.gpus == 8 and merged.nodes == 2 and merged.accelerator == "h100"
    assert plan_resources(engine.plan("demo,sort").nodes) == NO_RESOURCES  # no section: nothing asked


def test_a_parametric_variation_asks_for_its_value(cmx_home: Path, tmp_path: Path) -> None:
    """``nodes.#: {resources: {nodes: "#"}}`` selected as ``nodes.4`` asks for 4 nodes (the
    doc's example); ``#`` in a variation that takes no value is refused at load time."""
    write_recipe(tmp_path, doc_recipe())
    assert node_resources(engine.plan("train,tiny,nodes.4", recipes_dirs=[tmp_path]).root).nodes == 4
    assert node_resources(engine.plan("train,tiny", recipes_dirs=[tmp_path]).root).nodes == 2
    bad = write_recipe(tmp_path / "bad", "name: bad\ntags: [bad]\nsummary: s\nvariations:\n  v:\n"
                                         "    resources: {nodes: '#'}\n")
    with pytest.raises(RecipeError, match=re.escape("variations.v.resources.nodes: '#' is the value of a parametric")):
        load_recipe_file(bad)


def test_other_units_read_the_same() -> None:
    from cmx_core.recipes.resources import parse_resources

    assert {parse_resources({"memory": m}).memory_bytes for m in ("64G", "64Gi", "64GB", "64g", "65536M")} \
        == {64 << 30}
    assert parse_resources({"time": 90}).time_s == 90 and parse_resources({"time": "1d"}).time_s == 86400
    assert parse_resources({"time": 61}).time_minutes == 2  # a limit rounds up, never down


ERRORS = _table("| `resources:` | Error |")[1:]


@pytest.mark.parametrize(("value", "message"), [(r[0].strip("`"), r[1].strip("`")) for r in ERRORS])
def test_each_documented_bad_value_is_refused_at_load_time_with_file_line_and_key(tmp_path: Path, value: str,
                                                                                  message: str) -> None:
    text = f"name: bad\ntags: [bad]\nsummary: s\nresources: {value}\n"
    path = write_recipe(tmp_path, text)
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(path)
    assert str(caught.value) == f"{path}:4: {message}"
    in_variation = f"name: bad\ntags: [bad]\nsummary: s\nvariations:\n  v:\n    resources: {value}\n"
    with pytest.raises(RecipeError, match=re.escape(f":6: variations.v.{message}")):
        load_recipe_file(write_recipe(tmp_path, in_variation))
    with pytest.raises(jsonschema.ValidationError):  # the published schema refuses it too
        jsonschema.validate(yaml.safe_load(text), json.loads(SCHEMA.read_text()))


def test_the_cli_refuses_a_bad_section_in_one_line_with_exit_2(cmx_home: Path, tmp_path: Path) -> None:
    path = write_recipe(tmp_path, "name: bad\ntags: [bad]\nsummary: s\nresources:\n  memory: lots\n")
    proc = subprocess.run([sys.executable, "-m", "cmx_core", "plan", "--recipes", str(tmp_path), "--tags=bad"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert any(f"{path}:5: resources.memory: expected a size" in line for line in lines), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_local_executor_ignores_the_section(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, "name: asks-much\ntags: [asks, much]\nsummary: s\n"
                           "resources: {nodes: 4, gpus: 8, memory: 2T, accelerator: h100}\n"
                           "steps:\n  - uses: shell\n    with: {cmd: [echo, ran]}\n")
    run = engine.run_tags("asks,much", recipes_dirs=[tmp_path], executor="local")
    assert run.document["status"] == "completed"
