"""The recipe's ``resources:`` through the ray executor: each key becomes the task option
docs/recipes.md's table says (``nodes: N``: a task on each of N nodes; several tasks per node
refused, naming what can run them), the settings override it, and a run asking for CPUs,
memory and a time limit runs as a Ray task with those options on the real head."""

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
    assert documented["tasks_per_node"].startswith("refused above 1")
    assert documented["nodes"].startswith("a task on each of 2 nodes")  # the doc recipe asks for 2


def test_settings_override_the_recipe(cmx_home: Path, tmp_path: Path) -> None:
    _one_node_doc_recipe(tmp_path)
    plan = engine.plan("train,tiny", recipes_dirs=[tmp_path])
    task = task_resources(plan, RaySettings(num_cpus=2, num_gpus=1, accelerator_type="none", timeout_s=30), None)
    assert (task.num_cpus, task.num_gpus, task.accelerator_type, task.timeout_s) == (2, 1, None, 30)


def test_a_multi_node_recipe_is_a_task_per_node(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe())
    assert task_resources(engine.plan("train,tiny", recipes_dirs=[tmp_path]), RaySettings(), None).nodes == 2


def test_several_tasks_per_node_are_refused_naming_what_runs_them(cmx_home: Path, tmp_path: Path) -> None:
    write_recipe(tmp_path, doc_recipe().replace("tasks_per_node: 1", "tasks_per_node: 4"))
    with pytest.raises(UsageError, match=r"asks for 4 tasks per node \(resources: in recipe train-tiny\)"
                                         r".*\(launcher torchrun\) or --executor slurm"):
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
