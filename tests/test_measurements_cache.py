"""Measurements survive the cache: a measuring step is measured again unless its recipe asks
for cached measurements, and a served measurement keeps its metrics, task and artifacts and
says which run measured it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_core.plugins import loader as plugins
from cmx_core.run import engine

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cmx-textstats"

@pytest.fixture
def textstats(cmx_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[plugins.Registry]:
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    sys.modules.pop("cmx_textstats.plugin", None)
    from cmx_textstats import plugin

    loaded = plugins.load_registry(extra=[("textstats", plugin)])
    monkeypatch.setattr(plugins, "_REGISTRY", loaded)
    yield loaded


def _words(tmp_path: Path) -> Path:
    text = tmp_path / "words.txt"
    text.write_text("alpha beta\ngamma\n", encoding="utf-8")
    return text


def test_the_shipped_recipe_is_cached_by_default_yet_measures_every_run(textstats: plugins.Registry,
                                                                        tmp_path: Path) -> None:
    recipe = EXAMPLE / "src" / "cmx_textstats" / "recipes" / "textstats-count.yaml"
    assert "cache: false" not in recipe.read_text()  # nothing in the recipe needs to say it
    text = _words(tmp_path)
    first = engine.run_tags("textstats,count", {"path": str(text)})
    second = engine.run_tags("textstats,count", {"path": str(text)})
    for result in (first, second):
        assert set(result.document["metrics"]) == {"lines", "words", "bytes"}
        assert result.document["benchmark"]["task"] == "textstats.count"
        assert result.document["provenance"]["cached_measurement"] is None  # measured again
    text.write_text("one\n", encoding="utf-8")  # and so a changed file is never a stale count
    assert engine.run_tags("textstats,count", {"path": str(text)}).document["metrics"]["words"]["value"] == 1


def test_a_recipe_that_asks_gets_the_whole_measurement_labelled_cached(textstats: plugins.Registry,
                                                                       tmp_path: Path) -> None:
    shipped = (EXAMPLE / "src" / "cmx_textstats" / "recipes" / "textstats-count.yaml").read_text()
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "cached.yaml").write_text(shipped.replace("name: textstats-count", "name: textstats-cached")
                                         .replace("tags: [textstats, count]", "tags: [textstats, cached]")
                                         + "cache: {measurements: true}\n")
    text = _words(tmp_path)
    first = engine.run_tags("textstats,cached", {"path": str(text)}, recipes_dirs=[recipes])
    second = engine.run_tags("textstats,cached", {"path": str(text)}, recipes_dirs=[recipes])
    assert first.document["provenance"]["cached_measurement"] is None
    cached = second.document["provenance"]["cached_measurement"]
    assert cached["run_id"] == first.run_id
    assert first.document["timing"]["started_at"] <= cached["measured_at"] <= second.document["timing"]["started_at"]
    for key in ("metrics", "benchmark", "status", "outputs"):
        assert second.document[key] == first.document[key]
    assert second.plan.nodes[-1].id in [n["node_id"] for n in _nodes(second.run_dir) if n["status"] == "cached"]


def test_a_step_that_does_not_declare_measuring_keeps_its_part_in_the_cache(cmx_home: Path) -> None:
    first = engine.run_tags("demo,sort", {"repeats": "1"}, recipes_dirs=[_cached_demo(cmx_home)])
    second = engine.run_tags("demo,sort", {"repeats": "1"}, recipes_dirs=[_cached_demo(cmx_home)])
    assert second.document["metrics"] == first.document["metrics"]
    assert second.document["provenance"]["cached_measurement"]["run_id"] == first.run_id


def _cached_demo(home: Path) -> Path:
    """demo-sort without its step's ``measures: true``: a python step cmx cannot know
    measures, in a cached recipe."""
    folder = home / "demo-cached"
    if not folder.exists():
        folder.mkdir()
        shipped = Path(engine.show_recipe("demo-sort").path).read_text()
        assert "measures: true" in shipped and "cache: false" not in shipped
        (folder / "demo-sort.yaml").write_text(shipped.replace("measures: true", "measures: false"))
    return folder


def test_the_shipped_benchmark_is_measured_every_run_and_the_plan_says_so(cmx_home: Path) -> None:
    first = engine.run_tags("demo,sort", {"repeats": "1"})
    second = engine.run_tags("demo,sort", {"repeats": "1"})
    assert second.document["provenance"]["cached_measurement"] is None
    assert [n["status"] for n in _nodes(second.run_dir)] == ["cached", "ran"]  # the data set is reused
    assert second.document["metrics"].keys() == first.document["metrics"].keys()
    root = engine.plan("demo,sort").root
    assert root.measures and not root.cacheable and root.cache_status == "disabled"
    assert root.cache_reason.startswith("measures on every run")


def _nodes(run_dir: Path) -> list[dict[str, object]]:
    import json

    return list(json.loads((run_dir / "nodes.json").read_text()))
