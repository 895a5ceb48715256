"""What the resolver works out once and reuses (issue 17's 10,000-node plan): per recipe, the
scan of its steps' templates and facts and the step-parameter checks that passed; per query,
its candidates. A second plan in the same session gives the same plan, reasoning and errors
as the first; nothing that depends on a node, the environment or a failed check is reused."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from cmx_core.errors import CmxError
from cmx_core.plan.planner import canonical_digest
from cmx_core.recipes.template_checks import PlanCheckError, value_templates
from cmx_core.resolve.resolver import paused_gc
from cmx_core.run import engine

RECIPES = {
    "top": "name: top\ntags: [top]\nsummary: t\ninputs:\n  n: {type: integer, default: 3}\n"
           "  where: {type: path, default: ~/data}\n"
           "variations:\n  cpu: {group: device, default: true}\n  gpu: {group: device}\n"
           "deps:\n  - {tags: [mid], as: a, with: {n: '{{ inputs.n }}'}}\n"
           "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inputs.n }}', '{{ deps.a.out }}']}}\n"
           "  - {uses: cmx.facts, with: {names: [os]}}\n",
    "mid": "name: mid\ntags: [mid]\nsummary: m\ninputs:\n  n: {type: integer, default: 0}\n"
           "outputs:\n  out: {value: '{{ facts.os.name }}'}\n"
           "steps:\n  - {uses: shell, with: {cmd: [echo, mid]}}\n",
}


def write(directory: Path, recipes: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in recipes.items():
        (directory / f"{name}.yaml").write_text(text)
    return directory


def shape(plan: engine.Plan) -> list[tuple[object, ...]]:
    return [(n.id, n.cache_key, dict(n.inputs), dict(n.variations), dict(n.facts_used), len(n.steps))
            for n in plan.nodes]


def test_a_second_plan_in_a_session_is_the_first_one_again(tmp_path: Path) -> None:
    session = engine.open_session([write(tmp_path / "r", RECIPES)])
    first = engine.plan_in(session, "top")
    assert session.catalog.scans and session.catalog.selections  # kept for the next plan
    second = engine.plan_in(session, "top")
    assert shape(second) == shape(first)
    assert {"os"} <= set(first.root.facts_used) and "os" in first.node("mid").facts_used
    assert [(d.query, d.node_id, d.candidates, d.variations) for d in second.decisions] == \
        [(d.query, d.node_id, d.candidates, d.variations) for d in first.decisions]
    fresh = engine.plan("top", recipes_dirs=[tmp_path / "r"])  # a new session: scanned anew
    assert shape(fresh) == shape(first)


def test_a_path_default_expands_home_at_each_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = engine.open_session([write(tmp_path / "r", RECIPES)])
    monkeypatch.setenv("HOME", str(tmp_path / "one"))
    assert engine.plan_in(session, "top").root.inputs["where"] == str(tmp_path / "one" / "data")
    monkeypatch.setenv("HOME", str(tmp_path / "two"))
    assert engine.plan_in(session, "top").root.inputs["where"] == str(tmp_path / "two" / "data")


def test_a_bad_step_argument_is_refused_by_every_plan(tmp_path: Path) -> None:
    bad = {"bad": "name: bad\ntags: [bad]\nsummary: b\nsteps:\n  - {uses: shell, with: {cmd: 5}}\n"}
    session = engine.open_session([write(tmp_path / "r", bad)])
    for _ in range(2):  # a failed check is never remembered as passed
        with pytest.raises(PlanCheckError, match=r"bad\.yaml:\d+: steps\.0\.with\.cmd must be"):
            engine.plan_in(session, "bad")


def test_a_bad_template_is_refused_by_every_plan(tmp_path: Path) -> None:
    bad = {"bad": "name: bad\ntags: [bad]\nsummary: b\n"
                  "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inputs.typo }}']}}\n"}
    session = engine.open_session([write(tmp_path / "r", bad)])
    for _ in range(2):
        with pytest.raises(PlanCheckError, match=r"bad\.yaml:5: steps\.0\.with\.cmd\[1\]: .*inputs\.typo"):
            engine.plan_in(session, "bad")


def test_a_query_error_and_its_candidates_are_the_same_each_time(tmp_path: Path) -> None:
    two = {"v": "name: v\ntags: [v]\nsummary: v\nvariations:\n  bs.#: {}\n"
                "steps:\n  - {uses: shell, with: {cmd: [echo]}}\n",
           "w": "name: w\ntags: [v, w]\nsummary: w\nsteps:\n  - {uses: shell, with: {cmd: [echo]}}\n"}
    directory = write(tmp_path / "r", two)
    explained = [engine.explain("v,bs.1,bs.2", recipes_dirs=[directory]) for _ in range(2)]
    assert explained[0].error and "two values" in explained[0].error
    assert explained[0].to_json() == explained[1].to_json()
    session = engine.open_session([directory])
    for _ in range(2):
        with pytest.raises(CmxError, match="no recipe matches tags 'v,x'"):
            engine.plan_in(session, "v,x")


def test_a_recipe_added_to_the_catalog_is_a_candidate_next_time(tmp_path: Path) -> None:
    session = engine.open_session([write(tmp_path / "r", RECIPES)])
    engine.plan_in(session, "mid")
    other = write(tmp_path / "o", {"mid2": RECIPES["mid"].replace("name: mid", "name: mid2")})
    extra = engine.open_session([other]).catalog.listed["mid2"]
    session.catalog.add(extra)
    with pytest.raises(CmxError, match="match 2 recipes"):
        engine.plan_in(session, "mid")


def test_the_gc_pause_leaves_cycles_collectable_and_nothing_frozen() -> None:
    class Cell:
        other: object = None

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        cell = Cell()
        cell.other = cell  # a cycle made while paused
        probe = id(cell)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert any(id(o) == probe for o in gc.get_objects(generation=2))  # promoted, not traversed
    del cell
    gc.collect()
    assert not any(id(o) == probe and isinstance(o, Cell) for o in gc.get_objects())


def test_a_value_that_fails_to_encode_leaves_the_encoder_working() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        canonical_digest({"x": loop})
    shared = [1]
    assert canonical_digest({"a": shared, "b": shared}) == canonical_digest({"a": [1], "b": [1]})


def test_templates_keep_their_key_paths() -> None:
    value = {"cmd": ["echo", "{{ inputs.n }}", {"deep": ["x", "{% if 1 %}y{% endif %}"]}], "n": 3, "s": "{{ a }}"}
    assert value_templates(value, ("steps", 0, "with")) == (
        ("{{ inputs.n }}", ("steps", 0, "with", "cmd", 1)),
        ("{% if 1 %}y{% endif %}", ("steps", 0, "with", "cmd", 2, "deep", 1)),
        ("{{ a }}", ("steps", 0, "with", "s")),
    )
    assert value_templates("{{ b }}", ("outputs", "o", "value")) == (("{{ b }}", ("outputs", "o", "value")),)


def test_candidates_are_matched_without_building_them(tmp_path: Path) -> None:
    many = {f"r{i}": f"name: r{i}\ntags: [common, t{i}]\nsummary: r\nvariations:\n  v{i}: {{}}\n  bs.#: {{}}\n"
                     "steps:\n  - {uses: shell, with: {cmd: [echo]}}\n" for i in range(20)}
    session = engine.open_session([write(tmp_path / "r", many)])
    plan = engine.plan_in(session, "common,v7,bs.2")
    assert [(n.id, dict(n.variations)) for n in plan.nodes] == [("r7", {"v7": True, "bs": "2"})]
    assert len(session.catalog._built) == 1  # the 19 others were rejected by their names alone
    assert [(c.name, c.reason) for c in plan.decisions[0].candidates] == [("r7", "all tags match")]
    explained = engine.explain("common,v7,bs.2", recipes_dirs=[tmp_path / "r"])
    reasons = {c.name: c.reason for c in explained.decisions[0].candidates}  # explain lists every one
    assert reasons["r7"] == "all tags match"
    assert reasons["r3"] == "lacks tag 'v7' (neither a tag nor a variation of it)"
    with pytest.raises(CmxError, match=r"r0: lacks tag 'v00' \(neither a tag nor a variation of it; "
                                       r"did you mean 'v0'\?\)"):
        engine.plan_in(session, "common,v00")
