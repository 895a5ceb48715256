"""Candidates come from the rarest tag's posting list (issue 28): a dep asking ``get,itemN``
looks at the recipes tagged ``itemN`` (or with a variation of that name), not at every recipe
that carries the common tag ``get``. ``cmx explain`` and a no-match error still list every
recipe with one of the tags, with why each was rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core.catalog.catalog import Source, load_catalog
from cmx_core.errors import CmxError
from cmx_core.run import engine

COUNT = 300


def _collection(directory: Path, count: int = COUNT, fan: int = 50) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"i{i:04d}.yaml").write_text(
            f"name: item-{i:04d}\ntags: [get28, item{i}]\nsummary: s\n"
            "variations:\n  small: {group: size, default: true}\n  big: {group: size}\n"
            f"  flavour{i % 7}: {{}}\n  bs.#: {{}}\n"
            "steps:\n  - {uses: shell, with: {cmd: [echo]}}\n")
    deps = "".join(f"  - {{tags: [get28, item{i}], as: d{i}}}\n" for i in range(fan))
    deps = "\n" + deps if deps else " []\n"  # no deps: an empty list (a bare key is refused)
    (directory / "fan.yaml").write_text(f"name: fan\ntags: [fan]\nsummary: f\ndeps:{deps}"
                                        "steps:\n  - {uses: shell, with: {cmd: [echo]}}\n")
    return directory


def test_a_shared_tag_fan_out_looks_only_at_each_dep_s_rarest_tag(tmp_path: Path) -> None:
    directory = _collection(tmp_path / "r")
    session = engine.open_session([directory])
    plan = engine.plan_in(session, "fan")
    assert len(plan.nodes) == 51
    # 50 deps over 300 recipes tagged get: the catalog listed the root and the 50 leaves only
    # (the old union of every recipe with one of the tags listed all 301; the collection's own
    # recipes have neither tag).
    listed = [item for item in session.catalog._items.values() if item.path.startswith(str(directory))]
    assert len(listed) == 51
    leaf = next(d for d in plan.decisions if d.query == ("get28", "item7"))
    assert [(c.name, c.accepted) for c in leaf.candidates] == [("item-0007", True)]


def test_variation_names_have_posting_lists_too(tmp_path: Path) -> None:
    session = engine.open_session([_collection(tmp_path / "r", count=40, fan=0)])
    plan = engine.plan_in(session, "item12,big,bs.4")
    assert [(n.recipe.name, dict(n.variations)) for n in plan.nodes] == [("item-0012", {"big": True, "bs": "4"})]
    catalog = load_catalog(sources=[Source("t", tmp_path / "r")])
    by_flavour = [i.name for i in catalog.candidates(["flavour3", "get28"])]
    assert by_flavour == [f"item-{i:04d}" for i in range(3, 40, 7)]
    assert [i.name for i in catalog.candidates(["bs.9", "item5"])] == ["item-0005"]
    assert catalog.candidates(["get28", "nothing-has-this"]) == []
    assert [i.name for i in catalog.candidates(["get28", "get28"])][:2] == ["item-0000", "item-0001"]


def test_explain_and_errors_still_list_every_candidate(tmp_path: Path) -> None:
    directory = _collection(tmp_path / "r", count=10, fan=0)
    explained = engine.explain("get28,item3", recipes_dirs=[directory])
    candidates = explained.decisions[0].candidates
    assert len(candidates) == 10 and [c.name for c in candidates if c.accepted] == ["item-0003"]
    with pytest.raises(CmxError, match=r"no recipe matches tags 'get28,nope'.*item-0000: lacks tag 'nope'"):
        engine.plan_in(engine.open_session([directory]), "get28,nope")


def test_an_ambiguous_query_still_names_both(tmp_path: Path) -> None:
    directory = _collection(tmp_path / "r", count=5, fan=0)
    with pytest.raises(CmxError, match=r"tags 'get28,small' match 5 recipes"):
        engine.plan_in(engine.open_session([directory]), "get28,small")
