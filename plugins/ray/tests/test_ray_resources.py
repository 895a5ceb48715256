"""The recipe's ``resources:`` through the ray executor: each key becomes the task option
docs/recipes.md's table says (``nodes`` above 1 refused, naming the executors that can run
it), the settings override it, and a run asking for CPUs, memory and a time limit runs as a
Ray task with those options on the real head."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx_core.errors import UsageError
from cmx_core.testing.runs import engine
from cmx_ray.resources import task_resources
from cmx_ray.settings import RaySettings
from tests.test_recipe_resources import doc_mapping, doc_recipe, write_recipe

ASKS = """\
name: test-ray-asks
tags: [test, ray, asks]
summary: asks for a CPU, some memory and a time limit
resources: {cpus: 1, memory: 64M, time: 2m}
steps:
  - uses: shell
    with: {cmd: [echo, hi]}
"""


def _one_node_doc_recipe(folder: Path) -> None:
    write_recipe(folder, doc_recipe().replace("  nodes: 2 ", "  nodes: 1 "))


def test_each_key_becomes_the_documented_task_option(cmx_home: Path, tmp_path: Path) -> None:
    _one_node_doc_recipe(tmp_path)
    task = task_resources(engine.plan("train,tiny", recipes_dirs=[tmp_path]), RaySettings(), None)
    options = task.ray_options()
    documented = doc_mapping("Ray")
    for key, option in (("cpus", "num_cpus"), ("gpus", "num_gpus"), ("memory", "memory"),
                        ("accelerator", "accelerator_type")):
        name, value = re.findall(r"`([^`=]+)=([^`]+)`", documented[key])[0]
        given = options[option]
        shown = f"{given:g}" if isinstance(given, float) else str(given)
        assert name == option and shown == value.strip('"'), (key, options)
    assert f"({task.timeout_s:g} s)" in documented["time"]
    for key in ("nodes", "tasks_per_node"):
        assert documented[key].startswith("refused above 1")


def test_settings_override_the_recipe(cmx_home: Path, tmp_path: Path) -> None:
    _one_node_doc_recipe(tmp_path)
    plan = engine.plan("train,tiny", recipes_dirs=[tmp_path])
    task = task_resources(plan, RaySettings(num_cpus=2, num_gpus=1, accelerator_type="none", timeout_s=30), None)
    assert (task.num_cpus, task.num_gpus, task.accelerator_type, task.timeout_s) == (2, 1, None, 30)


def test_a_multi_node_recipe_is_refused_naming_the_executors_that_run_it(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe())
    with pytest.raises(UsageError, match=r"asks for 2 node\(s\) x 1 task\(s\) \(resources: in recipe train-tiny\)"
                                         r".*use --executor slurm"):
        engine.plan("train,tiny", recipes_dirs=[tmp_path], executor="ray")


def test_a_run_asking_for_cpus_memory_and_time_runs_with_them(cmx_home: Path, ray_head: str,
                                                              tmp_path: Path) -> None:
    write_recipe(tmp_path, ASKS)
    run = engine.run_tags("test,ray,asks", recipes_dirs=[tmp_path], executor="ray",
                     options={"address": ray_head, "env": "CMX_HOME"})
    assert run.document["status"] == "completed"
    job = json.loads((run.run_dir / "ray-job.json").read_text())
    assert job["resources"]["num_cpus"] == 1 and job["resources"]["memory"] == 64 << 20
    assert job["resources"]["timeout_s"] == 120 and job["exit_code"] == 0
