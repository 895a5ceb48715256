"""The resolver at scale: a 5,000-deep chain plans (no RecursionError on the path: resolve,
plan order, cache keys, JSON, the tree), a 500-dep fan-out resolves every leaf once, a
cycle deep down is still named, and the tag index answers like a scan would. No timings
here: those are in benchmarks/bench_engine.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx_core.catalog.catalog import Source, load_catalog
from cmx_core.errors import ResolveError
from cmx_core.run import engine

STEP = "steps:\n  - {uses: shell, with: {cmd: [echo, x]}}\n"


def chain(directory: Path, count: int, back_to: int | None = None) -> None:
    """``chain-0`` -> ``chain-1`` -> ... ; ``back_to`` makes the last link depend on that one."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        nxt = i + 1 if i + 1 < count else back_to
        dep = f"deps:\n  - {{tags: [chain{nxt}]}}\n" if nxt is not None else ""
        (directory / f"c{i:05d}.yaml").write_text(
            f"name: chain-{i:05d}\ntags: [chain{i}]\nsummary: link {i}\n{dep}{STEP}")


def test_a_5000_deep_chain_plans_renders_and_serialises(tmp_path: Path) -> None:
    chain(tmp_path / "r", 5_000)
    session = engine.open_session([tmp_path / "r"])
    plan = engine.plan_in(session, "chain0")
    assert len(plan.nodes) == 5_000
    assert [n.id for n in plan.nodes[:2]] == ["chain-04999", "chain-04998"]  # deps first
    assert plan.root.id == "chain-00000"
    assert len({n.cache_key for n in plan.nodes}) == 5_000  # each key folds in its dep's
    doc = json.loads(json.dumps(plan.to_json()))
    assert doc["nodes"][-1]["deps"] == {"chain1": "chain-00001"}
    tree = plan.render_tree().splitlines()
    last = next(line for line in tree if "chain-04999" in line)
    assert last.startswith(" " * 4 * 4_999 + "chain4999: chain-04999")


def test_a_cycle_5000_links_down_is_named(tmp_path: Path) -> None:
    chain(tmp_path / "r", 5_000, back_to=4_990)
    session = engine.open_session([tmp_path / "r"])
    with pytest.raises(ResolveError, match=r"dependency cycle: chain-04990 -> .* -> chain-04999 -> chain-04990"):
        engine.plan_in(session, "chain0")


def test_explain_of_a_deep_chain_gives_each_node_its_path(tmp_path: Path) -> None:
    chain(tmp_path / "r", 3_000)
    result = engine.explain("chain0", recipes_dirs=[tmp_path / "r"])
    assert result.error is None
    deepest = result.decisions[-1]
    assert deepest.node_id == "chain-02999"
    assert deepest.chain[:2] == ("chain-00000", "chain-00001") and len(deepest.chain) == 2_999


def test_a_500_dep_fan_out_resolves_each_leaf_once(tmp_path: Path) -> None:
    directory = tmp_path / "r"
    directory.mkdir()
    deps = "".join(f"  - {{tags: [leaf{i}], as: l{i}}}\n" for i in range(500))
    deps += "  - {tags: [leaf7], as: again}\n"  # the same leaf twice shares one node
    (directory / "fan.yaml").write_text(f"name: fan\ntags: [fan]\nsummary: root\ndeps:\n{deps}{STEP}")
    for i in range(500):
        (directory / f"l{i:03d}.yaml").write_text(f"name: leaf-{i:03d}\ntags: [leaf, leaf{i}]\nsummary: l\n{STEP}")
    plan = engine.plan("fan", recipes_dirs=[directory])
    assert len(plan.nodes) == 501
    assert plan.root.deps["l499"] == "leaf-499" and plan.root.deps["again"] == "leaf-007"
    assert [n.id for n in plan.nodes[:3]] == ["leaf-000", "leaf-001", "leaf-002"]  # declared order


def test_the_tag_index_answers_like_a_scan(tmp_path: Path) -> None:
    """Shadowed and broken entries stay out (a tag listed twice in a recipe makes it broken,
    issue 28); walk order kept."""
    high, low = tmp_path / "high", tmp_path / "low"
    high.mkdir()
    low.mkdir()
    (high / "a.yaml").write_text(f"name: a\ntags: [x, y]\nsummary: s\n{STEP}")
    (high / "d.yaml").write_text(f"name: d\ntags: [x, y, x]\nsummary: a tag twice\n{STEP}")
    (low / "a.yaml").write_text(f"name: a\ntags: [x, z]\nsummary: shadowed\n{STEP}")
    (low / "b.yaml").write_text(f"name: b\ntags: [x]\nsummary: s\n{STEP}")
    (low / "c.yaml").write_text("name: c\ntags: [x]\n: broken: [\n")
    catalog = load_catalog(sources=[Source("high", high), Source("low", low)])
    assert [r.name for r in catalog.with_tag("x")] == ["a", "b"]
    assert [r.source for r in catalog.with_tag("x")] == ["high", "low"]
    assert catalog.with_tag("z") == [] and catalog.with_tag("nope") == []
    assert [r.name for r in catalog.with_tag("y")] == ["a"]
    assert [p.rsplit("/", 1)[1] for p in catalog.errors] == ["d.yaml", "c.yaml"]
