"""cmx bundle replay: a bundle made under another CMX_HOME is re-run here from its locks and
compared with a verdict; a different recipe version is refused; another hardware class is
refused unless --allow-drift=hardware; a replay here with another machine's --facts is refused
(the "not comparable" verdict across hardware classes: tests/test_compare_noise.py)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cmx_core.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "examples" / "facts"
VERDICTS = {"reproduced", "within noise", "inconclusive", "differs", "not comparable"}


def _cmx(*args: Any) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in args])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Home A: two repeats of demo-sort from a user recipe directory, bundled."""
    home = tmp_path_factory.mktemp("home-a")
    recipes = tmp_path_factory.mktemp("recipes-a")
    for name in ("demo-sort.yaml", "demo-data.yaml"):
        shutil.copy(ROOT / "recipes" / "demo" / name, recipes / name)
    out = tmp_path_factory.mktemp("bundles")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CMX_HOME", str(home))
        runs = []
        for _ in range(2):
            code, text = _cmx("run", "recipe", "--tags=demo,sort", "--size=7", "--repeats=1", "--recipes", recipes,
                              "--json")
            assert code == 0, text
            runs.append(json.loads(text)["run_id"])
        assert _cmx("bundle", "create", *runs, "-o", out / "demo.tar.gz")[0] == 0
    shutil.rmtree(recipes)  # the recipes now exist only inside the bundle
    yield {"demo": out / "demo.tar.gz", "recipes_parent": recipes.parent}


def test_replay_under_another_home_prints_a_verdict(bundles: dict[str, Path], cli: Callable[..., Any]) -> None:
    done = cli("bundle", "replay", bundles["demo"], "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert len(report["replays"]) == 3  # at least 3 replays of the lock, however few the originals
    [comparison] = report["comparisons"]  # both runs share one lock: one distribution each side
    # same machine, 2 original samples: the timings are inconclusive (never "differs")
    assert comparison["verdict"] == "inconclusive" and comparison["reason"]
    assert len(comparison["original_runs"]) == 2 and len(comparison["replay_runs"]) == 3
    metrics = {m["name"]: m for m in comparison["metrics"]}
    assert {"items_per_second", "best_time_s", "items"} <= set(metrics)
    for metric in metrics.values():
        assert metric["verdict"] in VERDICTS and metric["reason"] and metric["band"] is not None
        assert metric["original"]["samples"] == 2 and metric["replay"]["samples"] == 3
    assert metrics["items"]["verdict"] == "reproduced" and metrics["items"]["replay"]["median"] == 7
    assert metrics["best_time_s"]["verdict"] == "inconclusive"
    human = cli("bundle", "replay", bundles["demo"], "--repeats", "1", "--check")
    assert human.code == 0 and "inconclusive" in human.out and "band" in human.out
    listed = json.loads(cli("results", "list", "--json").out)["runs"]
    assert len(listed) == 4  # the replays are stored here like any run


def test_replay_with_another_recipe_version_is_refused(bundles: dict[str, Path], cli: Callable[..., Any],
                                                       tmp_path: Path) -> None:
    recipes = tmp_path / "recipes-b"
    recipes.mkdir()
    shutil.copy(ROOT / "recipes" / "demo" / "demo-data.yaml", recipes / "demo-data.yaml")
    text = (ROOT / "recipes" / "demo" / "demo-sort.yaml").read_text()
    (recipes / "demo-sort.yaml").write_text(text.replace('version: "1.0"', 'version: "1.1"', 1))
    done = cli("bundle", "replay", bundles["demo"], "--recipes", recipes)
    assert done.code == 2 and "would differ from the lock" in done.err and "version" in done.err
    assert len(done.err_lines) == 1 and "Traceback" not in done.err
    assert json.loads(cli("results", "list", "--json").out)["runs"] == []


def test_another_hardware_class_needs_allow_drift(bundles: dict[str, Path], cli: Callable[..., Any]) -> None:
    """Planned for an L4 machine, the replay is refused as another hardware class; allowed that
    drift, it would still run here, so the L4 facts are refused as not this machine's."""
    refused = cli("bundle", "replay", bundles["demo"], "--facts", FACTS / "l4-1x.json")
    assert refused.code == 2 and "hardware class" in refused.err and "--allow-drift=hardware" in refused.err
    assert json.loads(cli("results", "list", "--json").out)["runs"] == []
    here = cli("bundle", "replay", bundles["demo"], "--facts", FACTS / "l4-1x.json", "--allow-drift=hardware")
    assert here.code == 2 and len(here.err_lines) == 1, here.err
    assert "describes another machine" in here.err and "--facts is for planning (cmx plan)" in here.err
    assert json.loads(cli("results", "list", "--json").out)["runs"] == []


def test_bad_replay_arguments(bundles: dict[str, Path], cli: Callable[..., Any]) -> None:
    unknown = cli("bundle", "replay", bundles["demo"], "--allow-drift=everything")
    assert unknown.code == 2 and "hardware" in unknown.err
    tolerance = cli("bundle", "replay", bundles["demo"], "--tolerance", "5")
    assert tolerance.code == 2 and "--tolerance" in tolerance.err
