"""docs/mlebench.md and the README say what the code does: the recipes and their tags, the
threshold table, the defaults, the paths inside the sandbox, MLE-bench's container settings,
the pool size, the offline competitions and their directions, the lite split's size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from cmx_mlebench import agent, container, grading, offline, plugin, splits
from cmx_mlebench.offline import datasets, pool
from cmx_mlebench.thresholds import medal_positions

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "mlebench.md").read_text()
README = (ROOT / "plugins" / "mlebench" / "README.md").read_text()
RECIPES = {p.stem: yaml.safe_load(p.read_text()) for p in (Path(plugin.__file__).parent / "recipes").glob("*.yaml")}


def test_the_recipe_table_matches_the_recipes() -> None:
    rows = re.findall(r"^\| `([a-z,-]+)` \| `([a-z-]+)` \|", DOC, re.M)
    assert {name: tags for tags, name in rows} == {r["name"]: ",".join(r["tags"]) for r in RECIPES.values()}
    for r in RECIPES.values():
        assert ",".join(r["tags"]) in README
    agents = [r for r in RECIPES.values() if "agent_cmd" in r["inputs"]]
    assert len(agents) == 4 and all(r["variations"]["docker"]["inputs"] == {"sandbox": "docker", "cpus": 4,
                                                                             "shm_size": "4G", "gpus": -1}
                                    for r in agents)


def _doc_position(formula: str, n: int) -> int:
    """A cell of the doc's table, for N teams (the three forms the table uses)."""
    if m := re.fullmatch(r"max\(1, int\(([0-9.]+) N\)\)", formula):
        return max(1, int(float(m[1]) * n))
    if m := re.fullmatch(r"10 \+ int\(([0-9.]+) N\)", formula):
        return 10 + int(float(m[1]) * n)
    return int(formula)


def test_the_threshold_table_is_the_code() -> None:
    rows = re.findall(r"^  \| ([0-9-]+|1000 and more) \| (.+?) \| (.+?) \| (.+?) \|$", DOC, re.M)
    assert len(rows) == 4
    for band, *formulas in rows:
        low = int(band.split("-")[0].split()[0])
        high = int(band.split("-")[1]) if "-" in band else 5000
        for n in (low, high):
            at = medal_positions(n)
            assert [_doc_position(f, n) for f in formulas] == [at.gold, at.silver, at.bronze], (band, n)


def test_defaults_and_limits() -> None:
    inputs = RECIPES["attempt"]["inputs"]
    assert "`--time-limit-s` (default 600" in DOC and inputs["time_limit_s"]["default"] == 600
    assert "`--memory-gb` (default 4" in DOC and inputs["memory_gb"]["default"] == 4
    assert "`--processes` (default 256)" in DOC and inputs["processes"]["default"] == 256
    assert agent.AgentSettings(("x",)).time_limit_s == 600 and agent.AgentSettings(("x",)).processes == 256
    assert "over 256 MiB" in DOC and grading.MAX_SUBMISSION_BYTES == 256 << 20
    assert container.MLE_BENCH_DEFAULT == {"mem_limit": None, "shm_size": "4G", "nano_cpus": 4e9, "gpus": -1}


def test_the_sandbox_paths() -> None:
    for path in (agent.DATA, agent.SUBMISSION, agent.TOOLS + "/validate_submission", agent.BASELINES_INSIDE):
        assert f"`{path}" in DOC
    assert "/mlebench/baselines/baseline.py" in DOC and (offline.BASELINES / "baseline.py").is_file()


def test_the_refused_environment_paths_are_the_codes() -> None:
    para = DOC[DOC.index("The agent's environment may live anywhere"):]
    para = " ".join(para[:para.index("\n\n")].split())
    listed = set(re.findall(r"`(/[a-z/]+)`", para[para.index("Only a path"):para.index("is refused")]))
    assert listed == set(agent.MLEBENCH_PATHS)
    assert {f"`{top}`" for top in agent.NOT_MOUNTABLE} <= set(re.findall(r"`/[a-z]+`", para))
    example = re.search(r"\(`(--agent-env: (/\S+) collides with MLE-bench's (\S+) in the sandbox); ", para)
    assert example is not None
    try:
        agent.check_env_path(Path(example[2]))
    except Exception as exc:  # noqa: BLE001 - the doc quotes its message
        assert str(exc).startswith(example[1])
    else:
        raise AssertionError(f"{example[2]} was accepted")


def test_offline_competitions_and_pool() -> None:
    for name, task in datasets.TASKS.items():
        label = {"accuracy": "accuracy, higher", "rmse": "RMSE, lower", "auc": "ROC AUC, higher"}[task.metric]
        assert f"`{name}` ({label} is better)" in " ".join(DOC.split()) and name in offline.BUILTIN
    assert "20 % of the data" in DOC and datasets.TEST_SHARE == 0.2 and datasets.SPLIT_SEED == 0
    assert "pool of 19 simple baseline" in DOC
    assert len(pool.classifiers()) == 19 and len(pool.regressors()) == 19
    assert "(22\ncompetition ids" in DOC and len(splits.lite_ids()) == 22


def test_answers_created_at_and_preparer_paths_as_described() -> None:
    """The reading of answers, created_at and prepared_as, stated in the doc, are in the code
    (their behaviour is tested in test_mlebench_answers.py)."""
    import inspect

    from cmx_mlebench import prepare, report

    words = " ".join(DOC.split())
    assert 'float_precision="round_trip"' in words and 'float_precision="round_trip"' in inspect.getsource(grading)
    assert "a `.jsonl` as a list of its lines' JSON objects" in words
    assert '".jsonl"' in inspect.getsource(grading.load_answers)
    assert "`created_at` is a `datetime`" in words and report.CompetitionReport.__annotations__["created_at"] in (
        "datetime", report.datetime)
    for path in ("built", "as-is", "mlebench-preparer"):
        assert f"`{path}`" in words and path in inspect.getsource(prepare)
    assert "`prepare(raw, public, private)`" in words


def test_the_agent_result_names_its_enforcement() -> None:
    from cmx_mlebench import steps

    text = " ".join(DOC.split())
    assert "`limits.enforced_by`" in text and '`{"memory": "watchdog-rss", "processes": "rlimit-nproc", ...}`' in text
    code = Path(steps.__file__).read_text()
    assert '"limits": {"enforced_by": run.result.enforced_by}' in code
    schema = json.loads((Path(steps.__file__).parent / "schemas" / "mle_bench.schema.json").read_text())
    assert "limits" in schema["$defs"]["agent"]["required"]


def test_every_difference_from_the_real_grader_names_a_test_that_exists() -> None:
    section = DOC.split("### Where cmx differs from `mlebench.grade`")[1].split("\n## ")[0]
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", section))
    defined = set(re.findall(r"^def (test_[a-z0-9_]+)\(", "".join(
        p.read_text() for p in (ROOT / "plugins" / "mlebench" / "tests").glob("test_*.py")), re.M))
    assert len(named) >= 9 and named <= defined, named - defined
