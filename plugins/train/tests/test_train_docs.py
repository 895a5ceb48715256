"""Every claim of the README is checked: here what can be read off the code (recipes, tags,
variations, metric units and directions, parameters, the stated tolerance, the command, the
headline query planning on an H100 machine and refused here); the behaviour it describes is
checked by the other test files (named in each test's docstring)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from cmx_train.config import PARAMS
from cmx_train.scaling import FORMULA, NOISY_CV, SUSPECT_ABOVE, Baseline, Efficiency, Point, efficiency

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
RECIPES = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "src" / "cmx_train" / "recipes").glob("*.yaml")}
FACTS = ROOT.parents[1] / "examples" / "facts" / "h100-sxm-8x.json"


def test_the_recipe_table_matches_the_recipes() -> None:
    rows = re.findall(r"^\| `(train,[a-z-]+)` \| `([a-z-]+)` \|", README, re.M)
    assert {name: tags for tags, name in rows} == {r["name"]: ",".join(r["tags"]) for r in RECIPES.values()}


def test_every_listed_variation_exists_in_every_recipe() -> None:
    section = README.split("Variations (every recipe):")[1].split("parametric")[0]
    named = set(re.findall(r"`([a-z0-9-]+)`", section)) | {"nproc.#", "nodes.#", "batch_size.#"}
    assert "`nproc.#`, `nodes.#`, `batch_size.#`" in README
    for recipe in RECIPES.values():
        assert named == set(recipe["variations"]), recipe["name"]


def test_the_metric_table_matches_what_the_step_reports(train: Any) -> None:
    """test_train_accuracy and test_train_max_batch check the other modes' metrics by name."""
    table = re.findall(r"^\| (`[^|]+`) \| ([^|]+) \| (higher|lower) \|$", README, re.M)
    documented: dict[str, tuple[str, bool]] = {}
    for names, unit, better in table:
        for name in re.findall(r"`([^`]+)`", names):
            documented[name.replace("<N>", "0")] = (unit.strip(), better == "higher")
    part = train(batch_size=16, steps=2, warmup_steps=0).result
    for name, metric in part.metrics.items():
        assert documented[name] == (metric.unit, metric.higher_is_better), name
    assert {"time_to_accuracy_s", "epochs_to_accuracy", "val_accuracy", "max_batch_size"} <= set(documented)


def test_the_stated_tolerance_is_the_tested_one() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("corr", ROOT / "tests" / "test_train_correctness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.LOSS_RTOL == 1e-4 and "relative tolerance of **1e-4**" in README


def test_every_parameter_of_the_step_is_an_input_of_the_recipes() -> None:
    for recipe in RECIPES.values():
        steps = recipe["steps"][0]["with"]
        assert set(steps) <= set(PARAMS), recipe["name"]
    for key in ("rdzv_timeout_s", "timeout_s", "memory_limit_mb", "max_batch", "baseline_samples_per_s",
                "target_accuracy", "max_epochs", "weights", "seed", "scaling", "threads_per_rank"):
        assert f"`{key}`" in README, key


def test_the_headline_query_plans_on_an_h100_machine_only(cli: Any, as_json: Any) -> None:
    proc = cli("plan", "recipe", "--tags=train,throughput,resnet50,h100", "--facts", str(FACTS), "--json")
    assert proc.returncode == 0, proc.stderr
    node = as_json(proc)["nodes"][0]
    assert node["inputs"]["model"] == "resnet50" and node["inputs"]["device"] == "cuda"
    assert node["variations"] == {"resnet50": True, "h100": True}
    here = cli("plan", "recipe", "--tags=train,throughput,resnet50,h100")
    assert here.returncode != 0 and "requires accelerator h100" in here.stderr


def test_nodes_n_plans_n_nodes_on_slurm_and_on_ray(cli: Any, as_json: Any) -> None:
    """The ``nodes.N`` variation asks the scheduler for N nodes (before: 1, with no word)."""
    slurm = cli("plan", "recipe", "--tags=train,throughput,nodes.2", "--executor", "slurm", "--json")
    assert slurm.returncode == 0, slurm.stderr
    assert as_json(slurm)["executor"]["sbatch"] == "--nodes=2 --ntasks-per-node=1"
    ray = cli("plan", "recipe", "--tags=train,throughput,nodes.2", "--executor", "ray", "--json")
    assert ray.returncode == 0, ray.stderr
    assert as_json(ray)["executor"]["nodes"].startswith("2 (a task on each, STRICT_SPREAD")


def test_the_overhead_benchmark_exists_and_train_k8s_is_gone(cli: Any) -> None:
    assert cli("train-k8s", "--help").returncode != 0  # multi-node on Kubernetes: --executor k8s (docs/training.md)
    assert (ROOT.parents[1] / "benchmarks" / "bench_train.py").is_file()
    assert (ROOT.parents[1] / "benchmarks" / "bench_train_windows.py").is_file()


def _listed_causes() -> list[str]:
    section = README.split("**An efficiency above 1.05 is suspect**")[1].split("## ")[0]
    return re.findall(r"^\* `([^`]+)`", section, re.M)


def test_the_suspect_causes_the_readme_lists_are_the_ones_the_step_gives() -> None:
    """test_train_scaling checks when each fires; here that the README quotes them as written."""
    assert f"**An efficiency above {SUSPECT_ABOVE} is suspect**" in README and NOISY_CV == 0.1
    source = "input baseline_samples_per_s"
    given = [efficiency("strong", Point(440.0, 2, threads_per_rank=t), Baseline(base, source, measured))
             for t, base, measured in (
                 (2, Point(100.0, 1, threads_per_rank=1), True),
                 (1, Point(100.0, 1, threads_per_rank=2), True),
                 (2, Point(100.0, 1), True),
                 (2, Point(100.0, 1, threads_per_rank=2, total_threads=2, cores=1), True),
                 (2, Point(100.0, 1, threads_per_rank=2, step_time_cv=0.8), True),
                 (2, Point(100.0, 1), False))]
    causes = [cause for judged in given for cause in judged.causes]
    listed = _listed_causes()
    assert len(listed) == len(causes) == 6
    for quoted, cause in zip(listed, causes, strict=True):
        assert cause.startswith(quoted), (quoted, cause)
    example = Efficiency("strong", FORMULA["strong"], 2.0, True, ("...",)).warning()
    assert example is not None and f"`cmx-train: warning: {example[:-3]}" in " ".join(README.split())


def test_the_readme_states_both_formulas_as_the_results_record_them() -> None:
    for kind, step_times in (("strong", "t(1) / (N x t(N))"), ("weak", "t(1) / t(N)")):
        assert step_times in FORMULA[kind] and f"`{step_times}`" in README, kind
    sweeps = (ROOT.parents[1] / "docs" / "sweeps.md").read_text()
    assert f"above {SUSPECT_ABOVE} is flagged as suspect" in " ".join(sweeps.split())
