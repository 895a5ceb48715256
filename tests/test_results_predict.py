"""``cmx results predict`` and ``suggest`` (#51) on real stored runs of a recipe whose step
prints a known throughput: ``1000·b/(1+b/64)``, 1.5 times that for ``algo=fast``, times a
±3 % factor that awk draws from a seed fixed by the configuration (so a test never depends
on the machine's speed). The model learns from some configurations and is judged on the
others, which it never saw."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

RECIPE = """
name: planted-batch
tags: [planted, batch]
summary: a throughput that a known function of batch and algo gives, with a seeded 3 % wobble
inputs:
  batch: {type: integer, default: 1}
  algo: {type: string, default: slow}
cache: false
steps:
  - uses: shell
    measures: true
    with:
      cmd: ["awk", "-v", "b={{ inputs.batch }}", "-v", "a={{ inputs.algo }}", "{AWK}"]
      metrics:
        items_per_second: {kv: RATE, unit: items/s, higher_is_better: true}
"""
AWK = ('BEGIN { srand(b * 31 + (a == \\"fast\\" ? 17 : 3)); '
       't = 1000 * b / (1 + b / 64) * (a == \\"fast\\" ? 1.5 : 1); '
       'printf \\"RATE=%.4f\\\\n\\", t * (1 + 0.06 * (rand() - 0.5)) }')
RECIPE = RECIPE.replace("{AWK}", AWK)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
HELD_OUT = {(2, "fast"), (8, "slow"), (16, "fast"), (64, "slow"), (128, "fast"), (256, "slow")}


def truth(batch: int, algo: str) -> float:
    return 1000 * batch / (1 + batch / 64) * (1.5 if algo == "fast" else 1)


@pytest.fixture
def learnt(cli: Callable[..., Any], recipes: Any) -> Callable[..., Any]:
    """Runs of every configuration but the held-out ones; returns the cli."""
    recipes("planted-batch", RECIPE)
    for batch in BATCHES:
        for algo in ("fast", "slow"):
            if (batch, algo) not in HELD_OUT:
                done = cli("run", "recipe", "--tags=planted,batch", "--recipes", recipes.dir, f"--batch={batch}",
                           f"--algo={algo}", "--json")
                assert done.code == 0, done.err
    return cli


def test_held_out_points_fall_inside_the_90_percent_interval(learnt: Callable[..., Any], recipes: Any) -> None:
    at = [arg for batch, algo in sorted(HELD_OUT) for arg in ("--at", f"batch={batch},algo={algo}")]
    done = learnt("results", "predict", "--recipe", "planted-batch", *at, "--json")
    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert document["axes"] == ["algo", "batch"] and len(document["learnt_from"]) == 2 * len(BATCHES) - len(HELD_OUT)
    inside = 0
    for prediction in document["predictions"]:
        low, high = prediction["interval_90"]
        batch, algo = int(prediction["config"]["batch"]), prediction["config"]["algo"]
        ran = learnt("run", "recipe", "--tags=planted,batch", "--recipes", recipes.dir, f"--batch={batch}",
                     f"--algo={algo}", "--json")  # the held-out point, measured only now
        measured = json.loads(ran.out)["metrics"]["items_per_second"]["value"]
        inside += low <= measured <= high
        assert low < prediction["value"] < high and not prediction["measured"]
        assert abs(math.log(prediction["value"] / truth(batch, algo))) < 0.25  # within 25 %: it learnt the shape
    assert inside >= 0.8 * len(HELD_OUT), document["predictions"]


def test_the_table_names_the_runs_it_learnt_from_and_flags_extrapolation(learnt: Callable[..., Any]) -> None:
    done = learnt("results", "predict", "--recipe", "planted-batch", "--at", "batch=2048,algo=fast")
    assert done.code == 0, done.err
    assert "extrapolated" in done.out and "learnt from 14 runs of planted-batch" in " ".join(done.out.split())


def test_bad_configurations_are_one_line_errors(learnt: Callable[..., Any]) -> None:
    cases = {("--at", "batch=4,algo=quick"): "algo=quick was never run; the model knows algo = fast, slow",
             ("--at", "batch=4"): "give a value for algo",
             ("--at", "batch=4,algo=fast,color=red"): "color: not an input of these runs",
             ("--at", "batch"): "expected KEY=VALUE",
             ("--at", "batch=4,algo=fast", "--metric", "nope"): "--metric nope: no run of this recipe measured it"}
    for args, message in cases.items():
        done = learnt("results", "predict", "--recipe", "planted-batch", *args)
        assert done.code == 2 and message in done.err and len(done.err_lines) == 1, (args, done.err)


def test_too_few_runs_are_refused_in_one_line(cli: Callable[..., Any], recipes: Any) -> None:
    recipes("planted-batch", RECIPE)
    for batch in (1, 2, 4):
        assert cli("run", "recipe", "--tags=planted,batch", "--recipes", recipes.dir, f"--batch={batch}").code == 0
    done = cli("results", "predict", "--recipe", "planted-batch", "--at", "batch=8")
    assert done.code == 2 and len(done.err_lines) == 1
    assert "3 comparable run(s) of 'planted-batch'" in done.err and "needs at least 5" in done.err
    missing = cli("results", "suggest", "--recipe", "no-such-recipe")
    assert missing.code == 2 and "no valid or completed run of recipe 'no-such-recipe'" in missing.err


def test_suggest_picks_unmeasured_points_near_the_best_with_commands_to_run(learnt: Callable[..., Any],
                                                                            recipes: Any) -> None:
    done = learnt("results", "suggest", "--recipe", "planted-batch", "--count", "3", "--json")
    assert done.code == 0, done.err
    suggestions = json.loads(done.out)["suggestions"]
    assert len(suggestions) == 3
    configs = [(int(s["config"]["batch"]), s["config"]["algo"]) for s in suggestions]
    measured = {(b, a) for b in BATCHES for a in ("fast", "slow")} - HELD_OUT
    assert not set(configs) & measured  # never a configuration already run
    assert [s["optimistic"] for s in suggestions] == sorted((s["optimistic"] for s in suggestions), reverse=True)
    assert configs[0][1] == "fast" and configs[0][0] >= 64  # where the throughput is highest
    command = suggestions[0]["command"].split()
    assert command[:4] == ["cmx", "run", "recipe", "--tags=planted,batch"]
    ran = learnt(*command[1:], "--recipes", recipes.dir, "--json")  # the command runs as printed
    assert ran.code == 0, ran.err
    text = learnt("results", "suggest", "--recipe", "planted-batch")
    assert text.code == 0 and "cmx run recipe --tags=planted,batch" in text.out


def test_the_learn_extra_is_what_a_missing_library_message_installs() -> None:
    """Without scikit-learn or optuna the commands name ``pip install`` of these (cmx-core is
    no registry plugin, so not ``cmx plugins install``)."""
    from cmx_core.plugins.extras import extra_requirements, require_extra

    wanted = extra_requirements("cmx-core", "learn")
    assert sorted(r.split(">")[0] for r in wanted) == ["optuna", "scikit-learn"]
    require_extra("cmx-core", "learn", "cmx results predict")  # installed here: no error
