"""A plan's ``type: path`` inputs are bind-mounted read-only at their own paths (the
container replays the same lock, so the step gets the path it was given) — no engine needed."""

from __future__ import annotations

from pathlib import Path

from cmx_core.api import plan
from cmx_core.testing import execution_context, execution_request
from cmx_docker.build import ImageRecord
from cmx_docker.executor import DockerExecutor, container_plan
from cmx_docker.mounts import path_input_mounts
from cmx_docker.settings import DockerSettings

RECIPE = """
name: path-reader
tags: [path, reader]
summary: reads a model directory and a data file given as path inputs
inputs:
  model_path: {type: path, default: null, description: a model directory}
  data: {type: path, default: null, description: a data file}
  label: {type: string, default: "", description: "not a path: never mounted"}
steps:
  - uses: shell
    with: {cmd: [ls, "{{ inputs.model_path }}"]}
cache: false
"""


def _plan(tmp_path: Path, inputs: dict[str, str]):  # type: ignore[no-untyped-def]
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "reader.yaml").write_text(RECIPE)
    return plan("path,reader", inputs, recipes_dirs=[recipes])


def test_existing_path_inputs_are_mounted_read_only_at_their_paths(tmp_path: Path, home: Path) -> None:
    model = tmp_path / "models" / "llama"
    model.mkdir(parents=True)
    data = tmp_path / "data.json"
    data.write_text("{}")
    mounts = path_input_mounts(_plan(tmp_path, {"model_path": str(model), "data": str(data),
                                                "label": str(tmp_path)}))
    assert {(m.source, m.target, m.read_only) for m in mounts} == {
        (str(model.resolve()), str(model.resolve()), True), (str(data.resolve()), str(data.resolve()), True)}


def test_missing_nested_and_already_mounted_paths_are_not_mounted_twice(tmp_path: Path, home: Path) -> None:
    model = tmp_path / "models" / "llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    nested = _plan(tmp_path, {"model_path": str(tmp_path / "models"), "data": str(model / "config.json")})
    assert [m.source for m in path_input_mounts(nested)] == [str((tmp_path / "models").resolve())]
    assert path_input_mounts(nested, already=(tmp_path,)) == ()
    assert path_input_mounts(_plan(tmp_path, {"model_path": str(tmp_path / "absent")})) == ()


def test_the_container_gets_the_model_mount_and_the_plan_shows_it(tmp_path: Path, home: Path) -> None:
    model = tmp_path / "weights"
    model.mkdir()
    the_plan = _plan(tmp_path, {"model_path": str(model)})
    job = DockerExecutor().prepare(execution_request(the_plan, tmp_path / "run", settings=DockerSettings()))
    image = ImageRecord(tag="cmx-python:x", image_id="sha256:" + "0" * 64, digest="sha256:" + "0" * 64,
                        template="python", accelerator=None, base="b", base_id=None, base_digest=None,
                        runtime="docker 20.10", content_digest="d", built=False, build_s=0.0)
    volumes = container_plan(job, image, DockerSettings()).options.sdk_kwargs()["volumes"]
    assert volumes[str(model.resolve())] == {"bind": str(model.resolve()), "mode": "ro"}
    described = DockerExecutor().describe(execution_context(the_plan, DockerSettings()))
    assert f"{model.resolve()} (read-only, a path input)" in described["mounts"]
