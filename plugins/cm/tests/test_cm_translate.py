"""Translation of CM/MLC metadata into cmx recipes, and the report of what is not mapped."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from cm_helpers import write_script

from cmx_cm.collection import import_collection
from cmx_cm.conditions import EnvScope, all_of
from cmx_cm.meta import load_script
from cmx_cm.translate import translate
from cmx_core import api
from cmx_core.errors import UsageError


def test_identity_env_inputs_and_outputs(collection: Path) -> None:
    t = translate(load_script(collection / "demo-tool"))
    recipe = t.recipe
    assert recipe["name"] == "cm.demo-tool"
    assert recipe["tags"][:3] == ["cm", "demo", "tool"] and "demo-tool" in recipe["tags"]
    assert "fedcba9876543210" in recipe["description"]
    inputs = recipe["inputs"]
    assert inputs["cm_demo_mode"]["default"] == "slow"
    assert inputs["cm_demo_fixed"]["default"] == "fixed"
    assert inputs["label"] == {"type": "string", "description": "sets env CM_DEMO_LABEL"}
    assert {"version", "version_min", "version_max"} <= set(inputs)
    params = recipe["steps"][0]["with"]
    assert params["input_mapping"] == {"label": "CM_DEMO_LABEL"}
    assert params["env_inputs"]["cm_demo_mode"] == "CM_DEMO_MODE"
    assert params["new_env_keys"] == ["CM_DEMO_TOOL_*", "CM_DEMO_ECHO", "+PATH"]
    assert "cm_demo_echo" in recipe["outputs"] and "new_env" in recipe["outputs"]
    assert recipe["cache"] is True


def test_variations_groups_defaults_base_parametric(collection: Path) -> None:
    t = translate(load_script(collection / "demo-tool"))
    variations = t.recipe["variations"]
    assert variations["slow"] == {"group": "speed", "default": True, "inputs": {"cm_demo_mode": "slow"}}
    assert variations["fast"]["inputs"] == {"cm_demo_mode": "fast"}
    assert variations["extra"]["inputs"] == {"cm_demo_mode": "fast", "cm_demo_extra": "yes"}  # base merged in
    assert variations["size.#"]["inputs"] == {"cm_demo_size": "#"}
    assert "fast,extra" not in variations
    assert not [i for i in t.issues if i.key.startswith("variations.fast,extra")]
    assert t.recipe["steps"][0]["with"]["combinations"] == [{"parts": ["fast", "extra"],
                                                            "env": {"CM_DEMO_COMBO": "yes"}}]
    assert t.recipe["steps"][0]["with"]["variation_keys"] == {"extra": ["CM_DEMO_EXTRA"]}


def test_deps_conditions_names_and_lifecycle(collection: Path) -> None:
    t = translate(load_script(collection / "demo-tool"))
    deps = t.recipe["deps"]
    assert deps[0] == {"tags": ["cm", "demo", "base"], "as": "base"}
    assert len(deps) == 1  # the post dep is not planned before the node: the step runs it afterwards
    hooks = t.recipe["steps"][0]["with"]["hooks"]
    assert hooks == [{"tags": ["cm", "demo", "base"], "as": "demo_base", "kind": "post_deps",
                      "if": {"enable_if_env": {"CM_DEMO_MODE": ["never"]}}, "target": None, "env": {}}]
    assert not any(i.key == "post_deps[0]" for i in t.issues)


def test_run_time_conditions_become_run_time_deps_and_facts_used(collection: Path) -> None:
    t = translate(load_script(collection / "demo-dynamic"))
    deps = t.recipe["deps"]
    assert len(deps) == 1 and deps[0]["when"].startswith("facts.os.name in")  # CM_HOST_OS_TYPE is a fact
    hooks = t.recipe["steps"][0]["with"]["hooks"]  # decided at run time, not dropped
    wanted = {"enable_if_env": {"CM_SET_AT_RUN_TIME": ["yes"]}}
    assert [(h["kind"], h["if"]) for h in hooks] == [("prehook_deps", wanted)]
    assert not [i for i in t.issues if i.key == "prehook_deps[0]"]
    unknown = [i for i in t.issues if i.key == "unknown_cm_key"]
    assert unknown and unknown[0].file.endswith("demo-dynamic/_cm.yaml")


def test_cm_matching_rule() -> None:
    scope = EnvScope({"CM_X": "x"}, "CM")
    from cmx_core.testing.recipes import compile_expression

    def holds(mapping: dict[str, list[str]], value: str | None) -> bool:
        inputs = {} if value is None else {"x": value}
        return bool(compile_expression(all_of(scope, mapping)).evaluate({"inputs": inputs}))

    assert holds({"CM_X": ["yes"]}, "on") and holds({"CM_X": ["yes"]}, "anything")
    assert not holds({"CM_X": ["yes"]}, "no") and not holds({"CM_X": ["yes"]}, None)
    assert holds({"CM_X": ["no"]}, None) and holds({"CM_X": ["no"]}, "False") and not holds({"CM_X": ["no"]}, "1x")
    assert holds({"CM_X": ["cuda"]}, "CUDA") and not holds({"CM_X": ["cuda"]}, "rocm")


def test_version_ranges_of_deps(tmp_path: Path) -> None:
    root = tmp_path / "c"
    write_script(root, "needs-python", """
        alias: needs-python
        tags: [needs]
        default_version: '1.2'
        deps:
          - {tags: 'get,python3', version_min: '3.8', version_max: '3.99'}
        """)
    t = translate(load_script(root / "needs-python"))
    assert t.recipe["deps"][0]["with"] == {"version_min": "3.8", "version_max": "3.99"}
    assert t.recipe["inputs"]["version"]["default"] == "1.2"


def test_import_writes_loadable_recipes_and_a_report(collection: Path, tmp_path: Path, cmx_home: Path) -> None:
    out = tmp_path / "out"
    result = import_collection(collection, out)
    assert sorted(t.name for t in result.translations) == ["cm.demo-base", "cm.demo-dynamic", "cm.demo-tool",
                                                           "mlc.mlc-echo"]
    errors: list[str] = []
    names = {r.name for r in api.list_recipes(recipes_dirs=[out], errors=errors)}
    assert not errors and {"cm.demo-tool", "mlc.mlc-echo"} <= names
    report = (out / "report.json").read_text()
    assert '"key": "unknown_cm_key"' in report and '"reason":' in report
    plan = api.plan(["cm", "demo", "tool"], recipes_dirs=[out])
    assert [n.recipe.name for n in plan.nodes] == ["cm.demo-base", "cm.demo-tool"]


def test_bad_input_is_a_one_line_usage_error(tmp_path: Path) -> None:
    broken = tmp_path / "c" / "broken"
    broken.mkdir(parents=True)
    (broken / "_cm.yaml").write_text("alias: [unclosed\n")
    with pytest.raises(UsageError, match=r"_cm.yaml: not valid YAML"):
        load_script(broken)
    result = import_collection(tmp_path / "c", tmp_path / "out")
    assert result.failed and "not valid YAML" in result.failed[0].reason
    with pytest.raises(UsageError, match="inside the collection"):
        import_collection(tmp_path / "c", tmp_path / "c" / "out")
    with pytest.raises(UsageError, match="not a directory"):
        import_collection(tmp_path / "missing", tmp_path / "out2")


def test_repeated_tags_are_kept_once(tmp_path: Path) -> None:
    """CM accepts a tag listed twice; cmx refuses it in a recipe (issue 28), so the translation
    keeps each tag once, in the recipe's tags and in each dep's."""
    write_script(tmp_path, "twice", """
        alias: twice
        uid: 0123456789abcdef
        automation_alias: script
        tags: [get, twice, get]
        deps:
          - tags: detect,os,detect
    """)
    recipe = translate(load_script(tmp_path / "twice")).recipe
    assert len(recipe["tags"]) == len(set(recipe["tags"]))
    dep_tags = recipe["deps"][0]["tags"]
    assert len(dep_tags) == len(set(dep_tags)) and "detect" in dep_tags


@pytest.mark.parametrize(("extra", "named"), [
    ("deps: 5", "deps must be a list, got int"),
    ("post_deps: true", "post_deps must be a list, got bool"),
    ("new_env_keys: 1.5", "new_env_keys must be a list, got float"),
    ("clean_files: 7", "clean_files must be a list, got int"),
    ("variations: {a: {deps: 5}}", "variations.a.deps must be a list, got int"),
    ("variations: {a: {new_env_keys: 5}}", "variations.a.new_env_keys must be a list"),
    ("versions: {'1.0': {deps: 5}}", "versions.1.0.deps must be a list"),
])
def test_a_list_key_of_another_type_is_one_line_naming_it(extra: str, named: str, tmp_path: Path) -> None:
    """Found by importing scripts with one key of another type (24 tracebacks in a grid of 378,
    3 more inside variations and versions in one of 780): a number or ``true`` where CM reads a
    list failed the whole import; the script is now listed as failed, naming the key, and the
    rest import."""
    write_script(tmp_path / "c", "fine", "alias: fine\nuid: 0123456789abcdef\ntags: [fine]\n")
    write_script(tmp_path / "c", "typed", f"alias: typed\nuid: 0123456789abcdee\ntags: [typed]\n{extra}\n")
    result = import_collection(tmp_path / "c", tmp_path / "out")
    assert [t.name for t in result.translations] == ["cm.fine"]
    assert len(result.failed) == 1 and named in result.failed[0].reason and "typed/_cm.yaml" in result.failed[0].reason


WRONG_TYPES = [5, "str", None, [1, 2], {"a": 1}, True, 1.5, [None], {"_x": None}, [[1]], {"a": {"env": 5}},
               {"a": {"group": [1], "base": 5, "deps": "x"}}, {"a": {"deps": 5}}, {"a": {"default_env": [1]}},
               {"a": {"new_env_keys": 5}}, {"a": 5}, {"1.0": {"env": 5}}, {"a": {"deps": [{"tags": 5}]}},
               [{"tags": 5}], [{"tags": "a", "names": 5}], [{"tags": "a", "enable_if_env": 5}],
               [{"tags": "a", "skip_if_env": {"X": 5}}], [{"tags": "a", "env": 5}], [{"tags": "a", "version": [1]}],
               [{"tags": "a", "enable_if_env": {"X": [{"a": 1}]}}]]
TYPED_KEYS = ["alias", "tags", "deps", "post_deps", "prehook_deps", "posthook_deps", "variations", "default_variations",
              "env", "default_env", "new_env_keys", "new_state_keys", "input_mapping", "versions", "default_version",
              "cache", "sort", "script_name", "clean_files", "docker", "local_env_keys", "add_deps_recursive",
              "add_deps", "category", "cache_expiration", "input_description", "update_meta_if_env"]


def test_no_metadata_key_of_a_wrong_type_is_a_traceback(tmp_path: Path) -> None:
    """Every key the translator reads, given each of 25 values of other types (at the top, in
    a variation, a version, a dep): one import of the 675 scripts, none of them a traceback;
    each is imported or listed as failed in one line."""
    root = tmp_path / "c"
    for k, key in enumerate(TYPED_KEYS):
        for v, value in enumerate(WRONG_TYPES):
            meta = {"alias": f"s{k}-{v}", "uid": f"{k:08x}{v:08x}", "tags": ["s", f"k{k}", f"v{v}"], key: value}
            (root / f"s{k}-{v}").mkdir(parents=True)
            (root / f"s{k}-{v}" / "_cm.json").write_text(json.dumps(meta))
    result = import_collection(root, tmp_path / "out")
    assert len(result.translations) + len(result.failed) == len(TYPED_KEYS) * len(WRONG_TYPES)
    assert all("\n" not in failed.reason and "_cm.json: " in failed.reason for failed in result.failed)


def test_imported_files_are_readable_as_any_file_the_user_writes(collection: Path, tmp_path: Path) -> None:
    """Recipes, stamps.json and report.json are created 0644 less the umask, as the user's other
    files are (before: mkstemp's 0600, so a folder imported for a team was unreadable to it)."""
    umask = os.umask(0o022)
    try:
        out = tmp_path / "out"
        import_collection(collection, out)
    finally:
        os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes and set(modes.values()) == {0o644}, modes
